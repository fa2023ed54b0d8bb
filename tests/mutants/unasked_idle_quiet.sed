# peer.c: an IDLE that was never asked for closes the session quietly: a peer that closed with
# rooms in flight is not noticed as lost, and its rooms wait for nothing
s/^		    p->idle_asked_ms) {$/		    1) {/
