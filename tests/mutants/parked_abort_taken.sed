# an endpoint that aborted while its ROOM_META was parked is taken as a destination all the same
# when the engine's first chunk comes: the room is written into pages its engine has back
s/^\t\tif (r->nowners < r->ndest && d->peers\[m->peer\].epoch == m->epoch && m->aborted) {$/\t\tif (0) {/
