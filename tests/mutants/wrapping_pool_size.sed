# the pool size page_size x npages x nbufs wraps in 64 bits (the old multiplication)
s/^\t    __builtin_mul_overflow(len, (uint64_t)g->nbufs, &len) || len > POOL_BYTES_MAX) {$/\t    (len *= g->nbufs, 0) || len > POOL_BYTES_MAX) {/
