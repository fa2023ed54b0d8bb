# a core credits an immediate for a room of another core (shared token table): it writes that core's room state and event ring
s/^\tif (r->core != c->idx) {$/\tif (0) {/
