# a resync that comes due while no watch is open stays due (the loop's timeout is 0 until the
# watch is back)
s/^\tif (e->st == S_RUN && e->resync_at && now >= e->resync_at) {$/\tif (e->st == S_RUN \&\& e->watch.fd >= 0 \&\& e->resync_at \&\& now >= e->resync_at) {/
