# rooms kept failed for refused chunks not bounded per user: each session keeps twice its own cap
s/^\tif (!r \&\& rooms_of_uid(d, e->uid) >= 2 \* (uint64_t)d->cfg.max_rooms_per_uid) {$/\tif (0) {/
