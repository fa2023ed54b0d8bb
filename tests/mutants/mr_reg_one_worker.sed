# one registration worker whatever [cores] mr_workers says (as before there were several): an
# engine whose pool takes long to register (the kernel pins every page: seconds for a GPU's
# pool) holds every other engine's registration behind it
s/^\tconst uint32_t want\[KVXD_VJOB_KINDS\] = {cfg->connect_workers, cfg->mr_workers, 1};$/\tconst uint32_t want[KVXD_VJOB_KINDS] = {cfg->connect_workers, 1, 1};/
