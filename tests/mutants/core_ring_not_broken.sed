# a core ring the engine broke does not end its session
s/kvxd_engine_doom(d, e, "its core event ring is corrupt");/;/
