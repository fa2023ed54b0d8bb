# an endpoint that aborted while its ROOM_META was parked is dropped when the engine's first
# chunk comes (the old rule): the room waits for a destination that never comes, until waiting_ms
s/^\t\tif (r->nowners < r->ndest && d->peers\[m->peer\].epoch == m->epoch && m->aborted) {$/\t\tif (m->aborted) { parked_refuse(d, r, m, 0, NULL); continue; } if (0) {/
