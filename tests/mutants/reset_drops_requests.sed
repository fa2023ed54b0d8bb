# ECONNRESET ends the session at once: what the engine sent before it went is dropped
s/		if (n < 0 \&\& errno == ECONNRESET \&\& !e->reset_seen) {/		if (0) {/
