# prefill says "one immediate" in each of its per-rail immediates: decode takes the first as
# the whole share
s/^\t\tr->imm_count = (uint8_t)__builtin_popcount(r->imm_todo);$/\t\tr->imm_count = 1;/
