# a removed peer still torn down has the series of the peer of the same name added again
s/^\tif (p->removing)$/\tif (0)/
