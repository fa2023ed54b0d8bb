# the send buffer is compacted whenever anything of it was sent: a peer that reads a few bytes at a time has the whole backlog (up to 64 MiB) moved for each frame queued
s/^\tif (s->tx_off \&\& s->tx_off >= waiting) {$/\tif (s->tx_off) {/
