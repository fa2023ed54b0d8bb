# a room that leaves is never taken off its engine's count
s/^\t\tif (e \&\& e->nrooms)$/\t\tif (0)/
