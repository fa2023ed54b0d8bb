# the drain waits for every QP of the core (a stuck QP stalls every room)
/^\tif (room_outstanding(r) == 0 &&$/{N;s/.*/\tbool all_idle = true;\n\n\tfor (struct kvxd_qpc *q = c->qpcs; q; q = q->next)\n\t\tall_idle \&= q->sq_used == 0;\n\tif (room_outstanding(r) == 0 \&\& all_idle) {/}
