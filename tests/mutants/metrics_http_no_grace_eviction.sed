# over the cap, a connection whose answer waits unread past the grace is never evicted
s/^\t\tif (!victim \&\& now >= c->asked_ms + KVXD_HTTP_GRACE_MS)$/\t\tif (0)/
