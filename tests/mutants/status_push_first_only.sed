# a prefill room's failure is pushed to its first decode endpoint only
s/^\tfor (int d = 0; r->role == KVX_ROOM_PREFILL \&\& d < r->nmeta; d++) {$/\tfor (int d = 0; r->role == KVX_ROOM_PREFILL \&\& d < 1 \&\& d < r->nmeta; d++) {/
