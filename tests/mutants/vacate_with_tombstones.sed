# peer.c: a removed peer's slot is freed while a tombstone is still charged to it
s/	    p->rooms_held || p->tombstones_held)/	    p->rooms_held)/
