# ROOM_STATUS from any peer aborts a decode room
s/if (st->src_idx >= r->nsrc || r->src_peer\[st->src_idx\] != p->idx) {/if (0) {/
