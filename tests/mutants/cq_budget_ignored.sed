# peer.c: connect = on_demand sets up sessions whatever room the CQs have left (a CQ can overrun:
# it goes to error, and with it every QP on it)
/^session_room/,/^}/s/	if (sessions_live(d) < session_max(d))/	if (1)/
