# a failed rail replaces the whole session at once: the rooms on the other rails stop with it
s/^\t\t    !kvxd_peer_rail_failed(d, p, m->qpc->rail) &&$/\t\t    1 \&\&/
