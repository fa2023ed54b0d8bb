# peer.c: a dial answered BYE BUSY (no CQ room at the peer yet) ends as a failed setup: the rooms
# that needed it fail instead of waiting for room
/^on_frame/,/^}/{
/no CQ room at the peer for now/{
n
s/			p->quiet = true;/			;/
}
}
