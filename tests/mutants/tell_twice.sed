# the end of a room is told every time it is seen
s/^\tif (!atomic_compare_exchange_strong(&r->pc.told, &no, true)) {$/\tif (0) {/
