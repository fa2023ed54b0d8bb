# a rail whose QP cannot reach the peer fails the whole session setup (with a rail cut, no
# session comes up at all)
s/^\t\tif (rc \&\& rail_down(d, p, kvxd_lane_rail(d, c), "could not reach the peer"))$/\t\tif (0)/
