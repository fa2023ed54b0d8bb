# a room's end (an outbox event) does not settle it: it stays until something else looks
/^\tcase KVXD_MSG_EVENT: {$/,/^\t}$/s/^\t\tkvxd_room_settle(d, r);$/\t\t(void)0;/
