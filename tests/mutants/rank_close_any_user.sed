# another user's engine on the rank closes the rank's rooms that wait for their engine (a decode peer's ROOM_META made them; one that failed before its engine came is removed, and the holder's engine never hears of its end)
s/^\t\t    (r->engine_id < 0 && !rank_take(d, e)))$/\t\t    0)/
