# WR lengths and addresses in 32 bits (the original arithmetic)
s/uint32_t max_run = (uint32_t)(KVXD_WR_MAX_BYTES \/ ps ? KVXD_WR_MAX_BYTES \/ ps : 1);/uint32_t max_run = UINT32_MAX;/
s/\.raddr = m->addr + (b \* m->pool_npages + d) \* ps,/.raddr = m->addr + (uint32_t)((b * m->pool_npages + d) * ps),/
