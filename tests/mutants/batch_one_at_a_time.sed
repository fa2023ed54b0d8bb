# kvx_room_openv / kvx_room_closev wait for each reply before the next request: no pipelining
s/^\t\t\t\tc->bsent++;$/\t\t\t\tc->bsent++, r = wait_reply(c, 0);/
