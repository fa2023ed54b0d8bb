# a rail retry never asks the peer to hold its WRITEs: the node with nothing in flight replaces the session at once and flushes the peer's WRITEs to it
s/if ((p->features \& KVX_WIRE_FEAT_HOLD_ASK) \&\& kvxd_peer_send(d, p, \&ask) == 0) {/if (0 \&\& kvxd_peer_send(d, p, \&ask) == 0) {/
