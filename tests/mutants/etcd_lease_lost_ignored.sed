# etcd.c: a keepalive that says the lease is gone is taken as a renewal (the node stays
# unregistered, and every peer drops it)
s/		if (!jint(jobj(o, "result", json_type_object), "TTL", &ttl) || ttl <= 0)/		if (0)/
