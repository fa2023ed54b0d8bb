# peer.c: removing a peer that has no session fails none of its rooms (they wait for
# waiting_ms)
s/	if (!was_ready) {/	if (0) {/
