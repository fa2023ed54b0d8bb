# etcd.c: a watch that ended is set up again at once (a gateway that refuses it makes a busy loop)
s/	e->watch_at = now + RETRY_MS;/	e->watch_at = now;/
