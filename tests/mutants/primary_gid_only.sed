# the group check sees the primary gid only (the old accept check)
s/^\t\tif (c->groups\[i\] == gid)$/\t\tif (0)/
