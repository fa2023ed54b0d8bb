# the reply queue of an engine that does not read grows without bound
s/^\tif (e->outq_bytes + len > limit) {$/\tif (0) {/
