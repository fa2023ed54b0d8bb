# its own endpoint's ROOM_META of a new generation replaces a room that ended while its prefill engine still holds it (the old rule): the engine's late chunks of the earlier attempt are written into the new room's pages and complete it with holes
s/^\t    ((own >= 0 \&\& (r->engine_id < 0 || r->last_submitted)) || r->engine_closed ||$/\t    (own >= 0 || r->engine_closed ||/
