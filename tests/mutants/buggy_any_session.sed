# metadata not bound to its session
s/if (!q || q->errored || q->closing || q->epoch != m->epoch)$/if (!q || q->errored || q->closing)/
