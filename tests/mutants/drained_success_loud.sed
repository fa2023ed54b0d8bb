# a SUCCESS room's DRAINED wakes a parked control core
s/^			quiet_put(c, \&m);$/			out_put(c, \&m);/
