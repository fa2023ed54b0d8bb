# a pool whose registration is still running on the verbs worker is taken by rooms and chunks
# (its keys are not known yet: a room would name key 0)
s/if (p \&\& p->id == id \&\& p->engine_id == e->id \&\& !p->orphan \&\& !p->registering)/if (p \&\& p->id == id \&\& p->engine_id == e->id \&\& !p->orphan)/
