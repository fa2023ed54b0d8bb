# members.c: a node no longer listed in etcd is removed even while its session is READY (a lease
# that lapsed while etcd was slow tears down a healthy session)
/^kvxd_members_lost/,/^}/s/	if (p->state == KVXD_PEER_READY) {/	if (0) {/
