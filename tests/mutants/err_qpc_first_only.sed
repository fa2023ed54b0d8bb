# a room remembers only the first QP its errored WRs were on (fan-out: the others not awaited)
s/^\tassert(r->nerr_qpc < KVXD_MAX_TARGETS \* KVX_MAX_RAILS);$/\tif (r->nerr_qpc)\n\t\treturn;/
