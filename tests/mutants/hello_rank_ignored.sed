# the engine's rank is not kept: every session is rank 0 (rooms keyed by id alone)
s/^\t\te->rank = ((const struct kvx_eng_hello \*)buf)->rank;$/\t\te->rank = 0;/
