# the loop does not block while events wait for room in an event ring: an engine that does not read keeps kvxd awake
s/^\t\tif (!kvx_shring_empty(&e->sub))$/\t\tif (!kvx_shring_empty(\&e->sub) || e->outq_head)/
