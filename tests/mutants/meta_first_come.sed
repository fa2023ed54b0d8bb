# a ROOM_META from another endpoint is not refused here (first come, silently kept)
s/if (r \&\& r->meta_peer \&\& !owned_by(r, p, rm->dst_rank)) {/if (0) {/
