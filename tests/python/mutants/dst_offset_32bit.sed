# target: python/kvx/_kvx.c
# dst_offset + npages is checked in 32 bits (it wraps).
s/if ((uint64_t)dst_offset + pg.n > KVX_MAX_ROOM_PAGES) {/if (dst_offset + pg.n > KVX_MAX_ROOM_PAGES) {/
