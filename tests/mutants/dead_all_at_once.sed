# a failed room's chunks all go back at once, whatever room the outbox has left
s/^\twhile (c->dead_head \&\& n < DEAD_BATCH \&\& kvx_mbox_free_count(c->outbox) > reserve) {$/\twhile (c->dead_head) {/
