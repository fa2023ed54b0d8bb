# peer.c: with connect = always a CQ depth over the device's limit is lowered instead of refused
# (every peer's QPs no longer fit: a flush storm can overrun the CQ)
/^kvxd_peer_fit_cq/,/^}/s/	if (d->cfg.on_demand \&\& max >= one) {/	if (max >= one) {/
