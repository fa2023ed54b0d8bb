# engines may take every session slot: an operator finds none left
s/^\t\tif (slot >= 0 \&\& !admin \&\& others_of(d) >= KVXD_MAX_ENGINES - OPERATOR_SLOTS) {$/\t\tif (0) {/
