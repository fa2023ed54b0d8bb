# a pool's registration and deregistration wait for their reply no longer than any request: a
# large pool's (seconds to pin or unpin) times out while kvxd still registers it
s/^\t       POOL_MS_PER_GIB \* (int64_t)(gib < POOL_GIB_MAX ? gib : POOL_GIB_MAX);$/\t       0;/
