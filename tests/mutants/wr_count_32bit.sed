# WR counts and lengths in 32 bits (the original arithmetic)
s/uint32_t max_run = (uint32_t)(KVXD_WR_MAX_BYTES \/ ps ? KVXD_WR_MAX_BYTES \/ ps : 1);/uint32_t max_run = UINT32_MAX;/
s/\.len = (uint32_t)(run \* ps),/.len = (uint32_t)(run * (uint32_t)ps),/
