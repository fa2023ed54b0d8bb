# a FAILED room's DRAINED goes quietly too: the control core waiting to ABORT_ACK sleeps on
s/^		if (st == KVX_ROOM_SUCCESS) {$/		if (1) {/
