# every request waits for the cores' headroom, also those that send the cores nothing: a new session's HELLO and an operator's commands wait for a stuck polling core
s/if (n > 0 \&\& (size_t)n <= sizeof(buf) \&\& needs_cores(buf, (size_t)n)) {/if (n > 0) {/
s/if (k > 0 \&\& needs_cores(\&h, (size_t)k)) {/if (k > 0) {/
