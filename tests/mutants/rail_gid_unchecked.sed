# a peer's exact GIDs for its other rails are not checked (only the IPv4-mapped default is)
s/^\tif (rail > 0 \&\& rail <= cp->n_rail_gid)$/\tif (0)/
