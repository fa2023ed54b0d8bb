# no per-address cap on unauthenticated connections
s/if (same >= d->cfg.pending_per_addr \&\& (pc = pending_victim(d, addr, false))) {/if (0) {/
