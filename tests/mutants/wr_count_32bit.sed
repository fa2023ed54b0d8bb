# WR lengths and addresses in 32 bits (the original arithmetic)
s/uint32_t max_run = (uint32_t)(wr_max \/ ps ? wr_max \/ ps : 1);/uint32_t max_run = UINT32_MAX;/
s/\.raddr = g->addr + (b \* g->pool_npages + d) \* ps + g->dst_off,/.raddr = g->addr + (uint32_t)((b * g->pool_npages + d) * ps) + g->dst_off,/
