# another endpoint's ROOM_META takes over a room that ended before its engine let it go: the
# engine's late chunks are written to that endpoint's new room
s/^\t    ((own >= 0 \&\& (r->engine_id < 0 || r->last_submitted)) || r->engine_closed ||$/\t    (own < 0 || r->engine_id < 0 || r->last_submitted || r->engine_closed ||/
