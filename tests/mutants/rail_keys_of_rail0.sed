# a WRITE on any rail uses the destination's rail-0 key
s/^\t\t\t\.rkey = corrupt ? g->rkey\[q->rail\] ^ 0x5a5a00u : g->rkey\[q->rail\],$/\t\t\t.rkey = corrupt ? g->rkey[0] ^ 0x5a5a00u : g->rkey[0],/
