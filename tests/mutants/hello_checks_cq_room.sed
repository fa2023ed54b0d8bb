# a HELLO at a full CQ asks the idle session to close and is refused, before the peer proved
# itself (anyone at a peer's address can close our idle sessions)
/^pending_hello(/,/^}/ s/^\tpc->peer = p->idx;$/\tif (d->cfg.on_demand \&\& !session_room(d, kvxd_now_ms()))\n\t\treturn -1;\n\tpc->peer = p->idx;/
