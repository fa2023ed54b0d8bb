# a peer asked to hold its WRITEs that never replaces the session keeps ours held for ever: the asker has no bound of its own
s/(ours || (p->hold_asked_ms \&\& now >= p->hold_asked_ms + bound))) {/ours) {/
