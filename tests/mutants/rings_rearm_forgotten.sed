# libkvx asks for re-armed wake-ups and never says it is parked again after a drain
s/^\tif (c->rearm) {$/\tif (0) {/
