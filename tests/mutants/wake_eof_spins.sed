# libkvx ignores kvxd's closed event wake end: every wait returns at once, for good
s/^\t    !p\[1\].revents) {$/\t    0) {/
