# the gather extends an entry with a source page that does not follow it (wrong bytes land)
s/if (n \&\& ch->pages\[i + n - 1\] + 1 == s) {/if (n) {/
