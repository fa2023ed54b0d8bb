# a pending connection whose HELLO we answered holds our dial to its peer off until it expires,
# authenticated or not (anyone at the peer's address keeps us from dialling it)
/^pending_of(/,/^}/ s/^\t\t    now < pc->answered_ms + PENDING_AUTH_WAIT_MS)$/\t\t    (now || 1))/
