# a chunk for a room its engine closed while it still drains goes to that room, which skips it,
# and the engine is never told
/^chunk_submit(/,/^}/ s/^\tif (r \&\& (r->engine_id == e->id || r->engine_id < 0) \&\& r->engine_closed) {$/\tif (0) {/
