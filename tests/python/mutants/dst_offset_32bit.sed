# target: python/kvx/_kvx.c
# dst_offset + npages is checked in 32 bits (it wraps), in chunk_submitv (what Conn.submit uses).
s/if ((uint64_t)ch\[i\].dst_offset + ch\[i\].npages > KVX_MAX_ROOM_PAGES) {/if (ch[i].dst_offset + ch[i].npages > KVX_MAX_ROOM_PAGES) {/
