# a further endpoint's parked metadata is never taken: fan-out rooms cannot form
s/^\t\tif (r->nowners < r->ndest \&\& d->peers\[m->peer\].epoch == m->epoch) {$/\t\tif (0) {/
