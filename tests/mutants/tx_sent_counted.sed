# a peer's send buffer counts the bytes already sent until it drains once: a peer that reads, but never all, has its frames that must arrive refused with -ENOBUFS after 64 MiB
s/^\tif (waiting + len > TX_WAITING_MAX)$/\tif (s->tx_len + len > TX_WAITING_MAX)/
s/^\tif (s->tx_off \&\& s->tx_off >= waiting) {$/\tif (s->tx_off \&\& s->tx_off == s->tx_len) {/
