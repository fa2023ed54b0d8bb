# a silent peer is never declared lost
s/if (now >= p->last_rx_ms + silent_ms) {/if (0) {/
