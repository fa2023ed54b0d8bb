# the room hash ignores its key (the old unseeded function)
s/uint64_t v0 = t->k0 ^ 0x736f6d6570736575ULL, v1 = t->k1 ^ 0x646f72616e646f6dULL;/uint64_t v0 = 0x736f6d6570736575ULL, v1 = 0x646f72616e646f6dULL;/
s/uint64_t v2 = t->k0 ^ 0x6c7967656e657261ULL, v3 = t->k1 ^ 0x7465646279746573ULL;/uint64_t v2 = 0x6c7967656e657261ULL, v3 = 0x7465646279746573ULL;/
