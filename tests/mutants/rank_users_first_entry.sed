# [engine] rank_users: every listed rank goes to the first entry's user, whatever entry lists it
s/^\t\t\treturn e->uid != d->rank_uid\[i\]; \/\* the configured user's, always \*\/$/\t\t\treturn e->uid != d->rank_uid[0];/
