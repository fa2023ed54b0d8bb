# connections have no deadline: a client that never finishes its request is kept for ever
s/^\t\tif (c->deadline_ms > now)$/\t\tif (1)/
