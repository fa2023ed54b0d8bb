# a chunk's buffers are counted from buffer 0, not from its first buffer (layer)
s/^\t\tuint64_t b = (uint64_t)ch->buf_first + r->post_b;$/\t\tuint64_t b = r->post_b;/
