# a held engine socket stays watched for EPOLLIN: every loop pass wakes at once for it (and holds it again) until the cores caught up
s/(e->sock_held ? EPOLLRDHUP : EPOLLIN)/EPOLLIN/
