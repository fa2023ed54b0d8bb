# a oneshot producer leaves the consumer's parked flag set: one wake-up per batch, as before
s/^\tif (r->oneshot \&\& !atomic_exchange_explicit(/\tif (0 \&\& !atomic_exchange_explicit(/
