# a chunk of another user's engine on the rank makes or takes the rank's prefill room: its pages are written into the first user's decode peer
s/^\tif ((!r || r->engine_id < 0) && !rank_take(d, e)) {$/\tif (0) {/
