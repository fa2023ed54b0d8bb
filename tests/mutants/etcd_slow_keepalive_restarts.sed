# a keepalive unanswered within a third of the TTL starts the client over (a new lease), though the lease still lives
s/^\t\tif (now >= e->lease_ok_at + e->ttl_ms) {$/\t\tif (1) {/
