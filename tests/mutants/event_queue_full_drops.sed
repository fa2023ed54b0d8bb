# an event past the queue's bound is dropped and the call fails once; the session goes on
/^evq_push(/,/^}/ s/^\t\t\tshutdown(c->fd, SHUT_RDWR);$/\t\t\treturn -ENOBUFS;/
