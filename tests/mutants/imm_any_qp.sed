# a WRITE_WITH_IMM is credited whatever QP it came on
s/if (q->peer != r->src_peer\[src\] ||/if (0 \&\&/
