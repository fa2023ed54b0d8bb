# an ABORT from any endpoint fails the room
s/if (kvxd_room_owner(r, p->idx, a->dst_rank) < 0) {/if (0) {/
