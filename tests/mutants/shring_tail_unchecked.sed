# the consumer follows any tail the producer publishes
s/	if (t < r->pos || t - r->pos > r->size) {/	if (0) {/
