# keepalives follow lease_s whatever TTL etcd granted
s/^\t\td->etcd->ttl_ms = (uint64_t)ttl \* 1000;$/\t\t;/
