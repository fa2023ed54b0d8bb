# our own name listed with another value (a newer node's, signed) goes unsaid and uncounted
s/^\tif (!e->own_clash) {$/\tif (0) {/
