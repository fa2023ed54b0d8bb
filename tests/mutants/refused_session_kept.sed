# a refused session is answered and closed only at a well-formed request: one that sends requests too short to be one is answered each time and kept
/^handle(/,/^}/{
s/^\tif (e->refused) {$/\tif (e->refused \&\& len >= sizeof(*h) \&\& h->len == len) {/
}
