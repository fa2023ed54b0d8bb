# a HELLO in a peer's name, before any AUTH, gives up our dial to that peer that has not
# connected yet (anyone at the peer's address could cancel every such dial)
/^pending_hello(/,/^}/ s/^\t\tKVX_DEBUG("peer %s: dialled us while our dial has not connected: answering",$/\t\tp->quiet = true; kvxd_peer_reset(d, p, "crossing"); KVX_DEBUG("%s",/
