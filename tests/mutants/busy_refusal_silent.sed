# a dial refused while the previous session still rolls back (or for want of CQ room) is only
# closed (no BYE BUSY): the dialer counts a failed setup
/^pending_refuse_busy(/,/^}/ {
	/kvxd_stream_queue(&pc->s, buf/,/kvxd_stream_flush/ d
}
