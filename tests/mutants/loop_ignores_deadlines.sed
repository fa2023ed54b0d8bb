# the loop sleeps as long as it was told, whatever room deadline comes sooner
s/^\tif (next != KVXD_TIMER_NEVER \&\& timeout_ms > 0 \&\& next < now + (uint64_t)timeout_ms)$/\tif (0)/
