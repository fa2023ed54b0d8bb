# a state put while the room had no core ring is never handed to an engine, one without core rings too
/^\t\telse if (m->told == KVXD_TOLD_NOBODY \&\&$/{
n
s/^\t\t\t atomic_load_explicit(&r->pc.evq, memory_order_acquire)) {$/\t\t\t 1) {/
}
