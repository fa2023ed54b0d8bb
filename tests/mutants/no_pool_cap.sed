# max_pools_per_engine is not enforced
s/^\tif (pools_of_engine(d, e) >= d->cfg.max_pools_per_engine) {$/\tif (0) {/
