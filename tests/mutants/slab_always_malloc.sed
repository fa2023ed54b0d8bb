# the chunk cache never reuses a freed object: every allocation calls malloc
s/^\t\to = s->free\[cls\];$/\t\to = NULL;/
