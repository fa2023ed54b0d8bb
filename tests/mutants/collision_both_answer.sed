# peer.c: crossing dials: the side whose name sorts first answers the peer's dial too (both
# dials are answered, each supersedes the other)
/^pending_hello/,/^}/s/d->cfg.on_demand && p->initiator && p->dialer/0 \&\& p->dialer/
