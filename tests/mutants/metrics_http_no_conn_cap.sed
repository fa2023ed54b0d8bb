# every client is accepted: no cap on the endpoint's connections
s/^\t\tif (d->http_conns >= KVXD_HTTP_MAX_CONNS && !evict_idle(d, h)) {$/\t\tif (0) {/
