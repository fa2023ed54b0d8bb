# no per-address cap on unauthenticated connections
s/if (same >= d->cfg.pending_per_addr && oldest_same) {/if (0) {/
