# another user's engine on the rank opens decode rooms of it: the prefill side writes the first user's KV into its pages
s/^\tif (!rank_take(d, e)) {$/\tif (0) {/
