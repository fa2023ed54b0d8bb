# a session that only connected (no pool, no room) holds its rank: a user's monitoring session locks another user's engines out of the rank
s/^\t\tif (f && f != e && f->holds && !f->doomed && f->rank == e->rank && f->uid != e->uid)$/\t\tif (f \&\& f != e \&\& f->hello \&\& !f->doomed \&\& f->rank == e->rank \&\& f->uid != e->uid)/
