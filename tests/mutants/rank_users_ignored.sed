# [engine] rank_users is read but not obeyed: a rank goes to the first user whose engine takes it, configured or not
s/^\t\t\treturn e->uid != d->rank_uid\[i\]; \/\* the configured user's, always \*\/$/\t\t\tbreak;/
