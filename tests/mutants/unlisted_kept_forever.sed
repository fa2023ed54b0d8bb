# peer.c: a node no longer listed in etcd is kept after its session ended
s/		if ((p->unlisted || p->moved) \&\& !p->removing \&\& p->state != KVXD_PEER_READY) {/		if ((p->moved) \&\& !p->removing \&\& p->state != KVXD_PEER_READY) {/
