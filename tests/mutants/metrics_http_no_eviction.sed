# over the cap, a new client is refused even when silent connections hold every slot
s/^\t\tif (d->http_conns >= KVXD_HTTP_MAX_CONNS && !evict_idle(d, h)) {$/\t\tif (d->http_conns >= KVXD_HTTP_MAX_CONNS) {/
