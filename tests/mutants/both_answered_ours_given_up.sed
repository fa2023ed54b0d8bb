# crossing dials each answered by the other side: the side whose name sorts first gives its own
# dial up on the peer's AUTH too (the peer gives up its own on ours: both sessions end)
/^kvxd_pending_on_event(/,/^}/ s/^\t\tif (d->cfg.on_demand && p->dialer && p->initiator &&$/\t\tif (0 \&\& d->cfg.on_demand \&\& p->dialer \&\& p->initiator \&\&/
