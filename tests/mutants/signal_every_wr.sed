# every WR is signalled: one completion per WR instead of one per chunk part
s/^\t\t\t\.rkey = corrupt ? g->rkey\[q->rail\] ^ 0x5a5a00u : g->rkey\[q->rail\],$/&\n\t\t\t.signaled = true,/
