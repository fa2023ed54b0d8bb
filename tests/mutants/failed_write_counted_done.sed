# a WRITE whose transport retries ran out counts as done, as a completed one: nothing fails its
# room at once (a count that a dropped WRITE made false)
s/^\tif (wc->status == KVX_VX_WC_SUCCESS) {$/\tif (wc->status == KVX_VX_WC_SUCCESS || wc->status == KVX_VX_WC_RETRY_EXC_ERR) {/
