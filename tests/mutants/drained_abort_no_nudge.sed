# an abort or failure of a room whose DRAINED went quietly does not wake the control core
s/^	kvx_mbox_nudge(c->outbox);$/	(void)c;/
