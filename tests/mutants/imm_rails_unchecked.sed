# decode takes an immediate that says the share ends with more immediates than the session has
# rails: the source's real immediate no longer completes the room
s/^\t    want > (uint32_t)c->nrails || (r->imm_seen\[src\] \&\& want != r->imm_want\[src\])) {$/\t    (r->imm_seen[src] \&\& want != r->imm_want[src])) {/
