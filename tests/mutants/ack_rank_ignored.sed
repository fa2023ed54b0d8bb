# an ABORT_ACK is credited to any source on the sending peer, whatever rank it names
s/if (r->pc.src_peer\[i\] == p->idx \&\& r->src_rank\[i\] == a->src_rank)/if (r->pc.src_peer[i] == p->idx)/
