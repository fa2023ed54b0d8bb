# members.c: an etcd entry replaces a [peer.*] section of the same name
s/	if (p \&\& !p->discovered)$/	if (0)/
