# peer.c: an IDLE_ASK is agreed to even while a room of ours still needs the session
/^idle_answer/,/^}/s/ || !kvxd_rooms_idle_peer(d, p) ||$/ ||/
