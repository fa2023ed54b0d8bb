# a ROOM_META from another endpoint is not refused here (first come, silently kept)
s/if (r \&\& r->meta_peer \&\& r->meta_peer != p->idx + 1) {/if (0) {/
