# an entry's MAC is not checked: anyone who can write under the prefix lists a node where it likes
s/^\tok = kvx_auth_entry_verify(\&d->auth, key, v, mac);$/\tok = true;/
