# a ROOM_META parked by a slot's earlier peer counts as the new peer's own: its metadata for that endpoint skips the max_rooms_per_peer check
s/^\t\t    parked_current(d, r->parked\[i\]))$/\t\t    1)/
