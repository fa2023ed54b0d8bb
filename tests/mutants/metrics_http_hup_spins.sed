# a sent connection whose client shut its side, its answer unread, stays in the epoll set: its EPOLLHUP wakes the loop on every pass until the deadline
s/^\t\tepoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);$/\t\tkvxd_epoll_mod(d, c->fd, \&c->ev, 0);/
