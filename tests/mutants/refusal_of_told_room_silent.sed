# a chunk refused for a room whose end its engine was told (closed, or an earlier session's) is
# told to nobody: the engine's new attempt can succeed without it
/^chunk_refuse_room(/,/^}/ s/^\tif (r \&\& ((r->engine_id >= 0 \&\& r->engine_id != e->id) || r->engine_closed ||$/\tif (r \&\& ((r->engine_id >= 0 \&\& r->engine_id != e->id) || 0 ||/
/^chunk_refuse_room(/,/^}/ s/^\t\t  atomic_load(\&r->pc.told))) {$/\t\t  0)) {/
