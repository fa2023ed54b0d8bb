# the wake pair is made blocking and a wake-up waits for room: a consumer that stops reading
# blocks the producer (kvxd's control core or a polling core)
s/SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC/SOCK_STREAM | SOCK_CLOEXEC/
s/(void)!send(r->wake_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);/(void)!send(r->wake_fd, \&one, 1, MSG_NOSIGNAL);/
