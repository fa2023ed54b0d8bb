# the request head's buffer grows without a bound (a client that never ends its head is never refused)
s/^\t\t\tif (c->rx_cap >= KVXD_HTTP_REQ_MAX) {$/\t\t\tif (0) {/
