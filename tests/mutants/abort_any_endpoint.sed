# an ABORT from any endpoint fails the room
s/if (r->meta_peer != p->idx + 1) {/if (0) {/
