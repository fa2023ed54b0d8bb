# a read at the largest revision is taken: the watch's start (revision + 1) overflows
s/^\t    rev == INT64_MAX)$/\t    0)/
