# crossing dials told from a restarted peer by the millisecond: a session that became READY in
# the millisecond the peer's HELLO was answered counts as our crossing dial, so a peer that
# restarted and dialled us then is ignored (its AUTH verified) while our session to its old
# process stays up
/^kvxd_pending_on_event(/,/^}/ s/^\t\t     (p->state == KVXD_PEER_READY && p->ready_at > pc->answered))) {$/\t\t     (p->state == KVXD_PEER_READY \&\& (p->ready_at > pc->answered || p->ready_ms == kvxd_now_ms())))) {/
