# etcd.c: an entry refused for want of room is not tried again by a later full read
s/		d->etcd->resync_at = kvxd_now_ms() + 2 \* RETRY_MS;/		;/
