# a pool whose deregistration stopped half way is still taken by new chunks and rooms
s/if (p \&\& p->id == id \&\& p->engine_id == e->id \&\& !p->orphan \&\& !p->registering)/if (p \&\& p->id == id \&\& p->engine_id == e->id \&\& !p->registering)/
