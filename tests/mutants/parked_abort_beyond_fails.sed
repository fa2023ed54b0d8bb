# an endpoint that aborted while its ROOM_META was parked fails the room even when the engine's
# ndest leaves it out (it was never to be a destination): a room that needs only its first
# destination fails for it
s/^\t\tif (r->nowners < r->ndest && d->peers\[m->peer\].epoch == m->epoch && m->aborted) {$/\t\tif (d->peers[m->peer].epoch == m->epoch \&\& m->aborted) {/
