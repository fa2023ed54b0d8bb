# the drain waits for every QP of the core (a stuck QP stalls every room)
s/^\tif (room_outstanding(r) == 0 \&\& qps_quiet) {$/\tbool all_idle = true;\n\n\tfor (struct kvxd_qpc *q = c->qpcs; q; q = q->next)\n\t\tall_idle \&= q->sq_used == 0;\n\tif (room_outstanding(r) == 0 \&\& all_idle) {/
