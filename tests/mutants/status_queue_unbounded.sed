# the ROOM_STATUS queue never forgets what it sent: it grows with every failure of a live peer
/^status_evict_sent(/,/^}/s/^\tif (p->state != KVXD_PEER_READY)$/\tif (1)/
