# rooms.c: idle_ms counts from the session's start, not from when a room last used it (a
# session is asked to close right after a long room)
s/^	d->peers\[peer\]\.busy_ms = kvxd_now_ms();.*$//
s/^			d->peers\[r->peer_link\[i\]\.peer\]\.busy_ms = kvxd_now_ms();$//
