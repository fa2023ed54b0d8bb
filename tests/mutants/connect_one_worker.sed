# one connect worker whatever [cores] connect_workers says (as before there were several): a
# session whose move to RTR blocks (a cut link: a second per peer) holds every other session's
# connect behind it
s/^\tconst uint32_t want\[KVXD_VJOB_KINDS\] = {cfg->connect_workers, cfg->mr_workers, 1};$/\tconst uint32_t want[KVXD_VJOB_KINDS] = {1, cfg->mr_workers, 1};/
