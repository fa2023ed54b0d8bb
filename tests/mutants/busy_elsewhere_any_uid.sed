# another user's refused session on the rank keeps the rank holder's ids from it
s/^\t\tif (s \&\& s != e \&\& s->nbusy \&\& s->uid == e->uid \&\& s->rank == e->rank \&\&$/\t\tif (s \&\& s != e \&\& s->nbusy \&\& s->rank == e->rank \&\&/
