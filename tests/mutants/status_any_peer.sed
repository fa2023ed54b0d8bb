# ROOM_STATUS from any peer aborts a decode room
s/if (st->src_idx >= r->pc.nsrc || r->pc.src_peer\[st->src_idx\] != p->idx ||$/if (0 \&\&/
