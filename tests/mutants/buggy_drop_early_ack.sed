# an ACK that arrives before DRAINING is lost
/^\tif (r->abort_gen != a->gen) {$/i\	if (kvxd_room_state(r) != KVX_ROOM_DRAINING) {\n\t\td->ctr.acks_stale++;\n\t\treturn;\n\t}
