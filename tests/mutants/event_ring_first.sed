# libkvx reads the event ring before its core rings
s/^\tn = 0;$/\tn = kvx_shring_get(\&c->evt, c->rx, sizeof(c->rx));/
