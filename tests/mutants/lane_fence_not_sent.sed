# a QP that failed while its session stays does not have the peer fence its end: WRITEs of it
# still in the network land in pages the peer released
s/^\tif (lane < 0 || p->lanes_fenced & 1ull << lane)$/\tif (1)/
