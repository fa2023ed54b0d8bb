# max_pools_per_uid not enforced: one user's engines may take every pool slot of the node
s/^\tif (pools_of_uid(d, e->uid) >= d->cfg.max_pools_per_uid) {$/\tif (0) {/
