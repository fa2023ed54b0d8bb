# one connect worker, as before: a session whose move to RTR blocks (a cut link: a second per
# peer) holds every other session's connect behind it (the same threads in all: the other
# three deregister)
s/^static const int kind_threads\[KVXD_VJOB_KINDS\] = {KVXD_CONNECT_WORKERS, KVXD_MR_REG_WORKERS, 1};$/static const int kind_threads[KVXD_VJOB_KINDS] = {1, KVXD_MR_REG_WORKERS, KVXD_CONNECT_WORKERS};/
