# max_sessions_per_uid is not enforced
s/^\t\tif (live >= d->cfg.max_sessions_per_uid) {$/\t\tif (0) {/
