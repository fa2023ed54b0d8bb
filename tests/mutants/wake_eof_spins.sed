# libkvx ignores kvxd's closed event wake end: every wait returns at once, for good
s/^\t    kvx_shring_wake_drain(c->evt_wake) == -EPIPE \&\& !p\[1\].revents) {$/\t    kvx_shring_wake_drain(c->evt_wake) == -EPIPE \&\& 0) {/
