# max_rooms_per_uid not enforced: one user's sessions together hold max_rooms_per_engine each
s/^\tif (e \&\& rooms_of_uid(d, e->uid) - (old \&\& old->engine_id == engine_id) >=$/\tif (0 \&\& rooms_of_uid(d, e->uid) - (old \&\& old->engine_id == engine_id) >=/
s/^\tif ((!r || r->engine_id != e->id) \&\& rooms_of_uid(d, e->uid) >= d->cfg.max_rooms_per_uid) {$/\tif (0) {/
