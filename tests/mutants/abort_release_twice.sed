# the decode abort may be released again (RELEASED -> RELEASED): two ROOM_RELEASEs
s/^\t\[KVXD_ABORT_FENCING\] = {\[KVXD_ABORT_RELEASED\] = true},$/&\n\t[KVXD_ABORT_RELEASED] = {[KVXD_ABORT_RELEASED] = true},/
