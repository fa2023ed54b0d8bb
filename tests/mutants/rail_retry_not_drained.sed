# a core says it is idle for a held peer while that peer's WRITEs are still in flight: the
# session that tries the failed rail again flushes them
s/^\t\t\t\tbusy = q->sq_used || q->chain_n;$/\t\t\t\tbusy = false;/
