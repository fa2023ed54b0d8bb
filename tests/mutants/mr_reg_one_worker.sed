# one registration worker, as before: an engine whose pool takes long to register (the kernel
# pins every page: seconds for a GPU's pool) holds every other engine's registration behind it
# (the same threads in all: the other three deregister)
s/^static const int kind_threads\[KVXD_VJOB_KINDS\] = {KVXD_CONNECT_WORKERS, KVXD_MR_REG_WORKERS, 1};$/static const int kind_threads[KVXD_VJOB_KINDS] = {KVXD_CONNECT_WORKERS, 1, KVXD_MR_REG_WORKERS};/
