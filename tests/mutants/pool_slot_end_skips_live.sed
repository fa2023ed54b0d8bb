# a pool slot emptied moves the end down to it, past pools still in higher slots
s/while (d->pools_end > 0 \&\& !d->pools\[d->pools_end - 1\])/while (!p \&\& d->pools_end > i)/
