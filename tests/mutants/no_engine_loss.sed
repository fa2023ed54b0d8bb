# an engine that goes away leaves its rooms to the timers
s/^\t\t\tkvxd_abort_engine_lost(d, r);$/\t\t\t(void)r;/
