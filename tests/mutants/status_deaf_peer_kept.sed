# a live peer that reads nothing keeps its session while its unsent failure pushes pile up
/^kvxd_peer_push_status(/,/^}/ s/^\t    p->state == KVXD_PEER_READY)$/\t    0)/
