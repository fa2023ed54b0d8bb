# peer.c: a removed peer's slot is freed while rooms still link to it
s/p->j.n || !cds_list_empty(&p->rooms) ||/p->j.n ||/
