# crossing dials: the peer's AUTH that comes once our own dial is READY replaces our session as
# if the peer had restarted (its rooms fail)
/^kvxd_pending_on_event(/,/^}/ s/^\t\t     (p->state == KVXD_PEER_READY && p->ready_at > pc->answered))) {$/\t\t     0)) {/
