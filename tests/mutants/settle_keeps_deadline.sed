# a connection settled at its AUTH (answered BYE BUSY, or a crossing dial of ours won) keeps the
# deadline it got when it was accepted: one whose AUTH came late is closed at once, with the
# dialer's frames unread (the reset can overtake our BYE)
/^pending_settle(/,/^}/ {
	/^\tpc->deadline_ms = kvxd_now_ms() + d->cfg.pending_ms;$/ d
}
