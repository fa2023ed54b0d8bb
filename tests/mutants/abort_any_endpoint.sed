# an ABORT from any endpoint fails the room
s/if (r->meta_peer != p->idx + 1 || r->meta_rank != a->dst_rank) {/if (0) {/
