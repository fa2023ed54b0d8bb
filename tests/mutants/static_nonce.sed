# the acceptor nonce is a constant: a captured handshake replays
s/pc->nonce_a = kvx_rand_u64();/pc->nonce_a = 42;/
