# peer.c: an IDLE_ASK is agreed to at once after the last room left (a completion of a prefill
# WR may still be on its way on the asker's side, and its QP is destroyed under it)
/^idle_answer/,/^}/s/^	    kvxd_now_ms() < p->busy_ms + IDLE_ANSWER_GRACE_MS)$/	    0)/
