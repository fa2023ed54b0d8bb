# peer.c: connect = on_demand dials at start like connect = always (a session, and its QPs, for
# every peer whose name sorts after ours, needed or not)
/^dial_due/,/^}/s/	if (!d->cfg.on_demand)$/	if (1)/
