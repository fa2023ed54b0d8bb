# a ROOM_META from another endpoint is not held back here: taken as one more destination at once
s/if (r \&\& r->nowners \&\& own < 0) {/if (0) {/
