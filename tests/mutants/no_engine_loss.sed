# an engine that goes away leaves its rooms to the timers
s/^\t\t\tengine_lost_room(d, r);$/\t\t\t(void)r;/
