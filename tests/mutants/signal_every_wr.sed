# every WR is signalled: one completion per WR instead of one per chunk part
s/^\t\t\t\.rkey = corrupt ? m->rkey ^ 0x5a5a00u : m->rkey,$/&\n\t\t\t.signaled = true,/
