# an unknown room's ABORT is ignored (no tombstone, no ACK)
/^\td->ctr.aborts_received++;$/a\	if (!r)\n\t\treturn;
