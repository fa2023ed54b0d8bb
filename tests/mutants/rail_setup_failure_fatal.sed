# a rail whose QP cannot reach the peer fails the whole session setup (with a rail cut, no
# session comes up at all)
s/^\t\tif (rail_down(d, p, rail,$/\t\tif (0 \&\& rail_down(d, p, rail,/
