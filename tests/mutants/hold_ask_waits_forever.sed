# a peer asked to hold its WRITEs that never replaces the session keeps ours held for ever: the asker has no bound of its own
s/now >= p->hold_asked_ms + rail_hold_ask_ms(d)) {/now >= p->hold_asked_ms + rail_hold_ask_ms(d) \&\& 0) {/
