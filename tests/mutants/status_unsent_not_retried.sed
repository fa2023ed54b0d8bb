# a failure push that could not be sent on the live session waits for the peer's next session
/^kvxd_peer_tick(/,/^}/ s/^\t\tif (p->status_retry \&\& p->state == KVXD_PEER_READY)$/\t\tif (0)/
