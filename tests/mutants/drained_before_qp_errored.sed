# a room that had WRs on an errored QP drains, and the QP quiesces, before QP_ERRORED goes: its
# ACK can reach the peer ahead of the BYE FENCE
s/^\tif (q->errored \&\& !q->err_sent)$/\tif (0)/
s/ || !r->err_qpc\[i\]->err_sent)$/)/
