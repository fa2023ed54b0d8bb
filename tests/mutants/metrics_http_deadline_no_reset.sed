# at its deadline a connection with its answer unread closes without a reset: the kernel keeps the socket and the answer
/^\t\td->ctr.http_timeouts++;$/{n;s/^\t\treset_if_unread(d, c);$/\t\td->ctr.http_resets++;/}
