# a registration that failed part-way is answered at once, while its first rails are still being
# deregistered: an engine that tries again finds the pool's slot and pinned bytes taken
s/^\t\t\te = NULL;$/\t\t\t;/
