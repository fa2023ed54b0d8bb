# with several rails the room's last WRITE (the immediate: "the room is whole") goes at once,
# while other rails may still carry the room's bytes
s/r->post_b + 1 >= ch->nbufs \&\& room_outstanding(r) > 0) {$/r->post_b + 1 >= ch->nbufs \&\& 0) {/
