# [engine] rank_users lets its user in but keeps others out only while that user holds the rank: another user's engine that comes first, or in a restart's window, takes it
s/^\t\t\treturn e->uid != d->rank_uid\[i\]; \/\* the configured user's, always \*\/$/\t\t\tif (e->uid == d->rank_uid[i]) return false; else break;/
