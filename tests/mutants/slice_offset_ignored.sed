# a source's slice lands at offset 0 of every destination page, not at its own offset
s/^\t\t\t\.raddr = g->addr + (b \* g->pool_npages + d) \* ps + g->dst_off,$/\t\t\t.raddr = g->addr + (b * g->pool_npages + d) * ps,/
