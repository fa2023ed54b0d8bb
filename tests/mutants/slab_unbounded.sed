# the chunk cache ignores its bound: every freed object is kept
s/^\tif (bytes > s->cache_max - s->st.cached_bytes) {.*$/\tif (0) {/
