# a record may be longer than what the producer published
s/ || rec_bytes(h.len) > r->other - r->pos)/)/
