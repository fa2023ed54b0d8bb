# peer.c: connect = on_demand: a peer whose session failed is dialled only when a room asks for
# it; rooms from a lost peer fail at once, so none ever asks, and it stays lost for good
/^dial_due/,/^}/s/	if (!p->want \&\& !p->lost)/	if (!p->want)/
/^dial_due/,/^}/s/	p->want = kvxd_rooms_need_peer(d, p) || p->lost;/	p->want = kvxd_rooms_need_peer(d, p);/
