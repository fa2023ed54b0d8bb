# peer.c: a dial answered BYE BUSY (no CQ room at the peer yet) ends as a failed setup: the rooms
# that needed it fail instead of waiting for room
/^on_frame/,/^}/{
/dial again later, nothing failed \*\//{
n
s/			p->quiet = true;/			;/
}
}
