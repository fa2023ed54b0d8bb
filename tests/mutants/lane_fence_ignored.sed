# the peer's BYE FENCE is taken but our end of the QP stays in RTS
s/^\tp->lanes_fenced_by_peer |= 1ull << lane;$/\treturn 0;/
