# POOL_UNREG is answered at once, while the pool is still registered and pinned (and once more
# when its deregistration is done)
s/^\t\tif (v != -EINPROGRESS) \/\* else answered once deregistered \*\/$/\t\tif (true)/
