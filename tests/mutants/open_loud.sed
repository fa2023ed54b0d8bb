# a decode room's open wakes its parked polling core for an engine woken only for ends too
s/^	if (e && e->wake_ends)$/	if (false)/
