# its own endpoint's ROOM_META of a new generation for a room failed for a refused chunk (its
# engine has not closed it) is dropped by the core, and the new room waits for its timeout
/^on_room_meta(/,/^}/ s/^\tif (r \&\& own >= 0 \&\& r->owner\[own\].gen != rm->gen) {$/\tif (r \&\& !r->refused \&\& own >= 0 \&\& r->owner[own].gen != rm->gen) {/
