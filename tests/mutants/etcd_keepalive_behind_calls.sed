# a keepalive waits for the call in progress (a slow read holds the lease's renewal back)
s/^\tif ((e->st == S_RANGE || e->st == S_RUN) \&\& e->ka.fd < 0 \&\& now >= e->keepalive_at) {$/\tif ((e->st == S_RANGE || e->st == S_RUN) \&\& e->ka.fd < 0 \&\& e->call.fd < 0 \&\& now >= e->keepalive_at) {/
