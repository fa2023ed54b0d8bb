# pending connections whose HELLO we answered hold our dial to their peer off for as long as
# one is open, authenticated or not (anyone at the peer's address keeps us from dialling it)
/^dial_due(/,/^}/ s/^\t\tif (now < p->dial_held_ms + PENDING_AUTH_WAIT_MS)$/\t\tif (now || 1)/
