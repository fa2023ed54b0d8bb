# libkvx takes any message out of a core ring (a REPLY there is not a protocol error)
s/			n = -EPROTO;/			;/
