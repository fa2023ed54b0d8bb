# a session's operator commands are taken as they come, up to 64 from its socket and 64 from its ring each loop pass, every one a walk of the room table or a rendering of the metrics while other sessions, peers and timers wait
s/(e->gone || e->admin_pass != d->loop_pass)/true/
