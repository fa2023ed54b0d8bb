# an engine that closed its submission wake end keeps its session (kvxd's end reads EOF for good)
s/^\tif (e->rings && kvx_shring_park_done(&e->sub, woken) == -EPIPE)$/\tif (e->rings \&\& kvx_shring_park_done(\&e->sub, woken) == -EPIPE \&\& 0)/
