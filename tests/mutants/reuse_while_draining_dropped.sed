# its own endpoint reusing the id of a room that ended but still drains: the metadata goes to a core that drops it, and the new room waits for its timeout
/^on_room_meta(/,/^}/ s/^\tif (r \&\& own >= 0 \&\& r->owner\[own\].gen != rm->gen) {$/\tif (r \&\& (r->refused || !kvx_room_state_terminal(kvxd_room_state(r))) \&\& own >= 0 \&\& r->owner[own].gen != rm->gen) {/
