# a closing session's rooms keep pointing at its core rings, which go after a grace period
/atomic_store_explicit(&r->pc.evq, NULL, memory_order_release);/d
