# a dropped room's ROOM_FREE wakes a parked control core
s/		quiet_put(c, m);$/		out_put(c, m);/
