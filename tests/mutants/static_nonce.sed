# the acceptor nonce is a constant: a captured handshake replays
s/pc->nonce_a = random_u64();/pc->nonce_a = 42;/
