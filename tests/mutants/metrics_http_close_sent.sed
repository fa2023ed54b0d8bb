# a connection closes as soon as the kernel took its whole answer: a client that never reads leaves it to the kernel, outside every bound
s/^\tif (unacked(c) == 0 || shutdown(c->fd, SHUT_WR)) {$/\tif (1) {\n\t\tconn_close(d, c);\n\t\treturn;/
