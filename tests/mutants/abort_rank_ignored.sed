# an engine may abort a decode room of its rank that no engine holds while another user holds the rank (it learns the room is there, and its generation)
/^room_abort(/,/^}/s/^\t    (r->engine_id < 0 \&\& !rank_take(d, e)))$/\t    0)/
