# another endpoint's ROOM_META takes over a room that ended before its engine let it go: the
# engine's late chunks are written to that endpoint's new room
s/^\t    !r->refused \&\& ((own >= 0 \&\& r->engine_id < 0) || r->engine_closed || r->engine_gone)) {$/\t    !r->refused \&\& (own < 0 || r->engine_id < 0 || r->engine_closed || r->engine_gone)) {/
