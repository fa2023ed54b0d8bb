# the end of a room is told every time it is seen
s/^\tif (r->engine_told) {$/\tif (0) {/
