# a held engine socket is watched for nothing: an engine that shuts its sending side is not seen until the cores caught up
s/(e->sock_held ? EPOLLRDHUP : EPOLLIN)/(e->sock_held ? 0 : EPOLLIN)/
