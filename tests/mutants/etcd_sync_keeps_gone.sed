# members.c: a full read of the registry removes no node it no longer lists
s/		if (live(&d->peers\[i\]) && d->peers\[i\].discovered && !d->peers\[i\].seen)/		if (0)/
