# a polling core wakes an engine that asked for KVX_ENG_RINGS_REARM after every batch it put
# into the engine's core ring, parked or not
s/if (kvx_shring_notify(&q->ring))/if ((kvx_shring_set_oneshot(\&q->ring, false), kvx_shring_notify(\&q->ring)))/
