# HOLD_ASK goes to a peer whose HELLO does not say it answers it (an older kvxd ends the session as a loss on an unknown BYE)
s/if ((p->features \& KVX_WIRE_FEAT_HOLD_ASK) \&\& kvxd_peer_send(d, p, \&ask) == 0) {/if (kvxd_peer_send(d, p, \&ask) == 0) {/
