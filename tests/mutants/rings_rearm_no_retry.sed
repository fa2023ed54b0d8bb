# libkvx does not ask again without KVX_ENG_RINGS_REARM when an older kvxd refuses it
s/^\t\tif (r < 0 || rep->status != -EINVAL ||$/\t\tif (1 ||/
