# kvxd does not watch its end of the event ring's wake pair: the engine's wake-up for room is never read, and the end stays readable
s/^\telse if (kvxd_epoll_add(d, e->evt_wake, &e->room_ev, EPOLLIN)) \/\* its events would \*\/$/\telse if (0)/
