# another session's failed, unclosed attempt of an id does not stop this session's room of it
s/^\tif ((!r || r->engine_id != e->id) \&\& busy_elsewhere(d, e, m->room)) {$/\tif (0 \&\& busy_elsewhere(d, e, m->room)) {/
