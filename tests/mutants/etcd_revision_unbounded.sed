# a read at the largest revision is taken: the watch's start (revision + 1) overflows
s/^\t    e->revision < 0 || e->revision == INT64_MAX)$/\t    e->revision < 0)/
