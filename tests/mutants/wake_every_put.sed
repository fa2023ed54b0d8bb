# every message put while the consumer is parked writes the eventfd again
s/^\t    atomic_exchange_explicit(&m->parked, 0, memory_order_seq_cst)) {$/\t    1) {/
