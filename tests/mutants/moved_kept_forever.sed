# peer.c: a node listed elsewhere in etcd keeps its old address after its session ended
s/		if ((p->unlisted || p->moved) \&\& !p->removing \&\& p->state != KVXD_PEER_READY) {/		if ((p->unlisted) \&\& !p->removing \&\& p->state != KVXD_PEER_READY) {/
