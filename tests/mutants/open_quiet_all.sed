# every decode room's open is put quietly, for an engine woken for every state too
s/^	if (e && e->wake_ends)$/	if (true)/
