# a recheck of the drain list tells every drained room at once, past the iteration's outbox
# reserve (and, with more rooms than the outbox holds, past its end: out_put drops them)
/^prefill_check_drained(/,/^}/ s/^\t\tif (c->drain_bulk \&\& kvx_mbox_free_count/\t\tif (false \&\& c->drain_bulk \&\& kvx_mbox_free_count/
