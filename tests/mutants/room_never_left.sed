# a room that leaves is never taken off its engine's count
s/^\tif (e && e->nrooms)$/\tif (0)/
