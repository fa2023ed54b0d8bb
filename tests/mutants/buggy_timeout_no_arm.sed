# the waiting timeout fails the room without arming a generation or sending ABORTs
s/^\tkvxd_decode_abort(d, r, -ETIMEDOUT, reason);$/\tstruct kvxd_msg m = {.type = KVXD_MSG_ROOM_FAIL, .error = -ETIMEDOUT, .room = \&r->pc};\n\n\tsnprintf(m.reason, sizeof(m.reason), "%s", reason);\n\tkvx_pcore_send(\&d->cores[r->pc.core], \&m);/
