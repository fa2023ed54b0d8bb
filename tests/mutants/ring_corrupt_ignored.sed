# a corrupt submission ring is skipped, the session kept
/kvxd_engine_doom(d, e, "its submission ring is corrupt");/d
