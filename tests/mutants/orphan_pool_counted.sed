# a pool gone for its engine (deregistration refused by the NIC) still counts toward its pool cap
s/n += d->pools\[i\] \&\& d->pools\[i\]->engine_id == e->id \&\& !d->pools\[i\]->orphan;/n += d->pools[i] \&\& d->pools[i]->engine_id == e->id;/
