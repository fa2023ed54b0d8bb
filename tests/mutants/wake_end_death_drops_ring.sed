# an engine that died, seen first by a closed wake end, is closed at once as a bad engine: what its ring held (its last chunks) is never taken
s/^\tif (e->doomed || (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))))$/\tif (e->doomed)/
/^\tring_take(d, e, RING_BYTES \/ KVX_SHRING_REC_HDR, true, NULL);$/d
