# an AUTH on a connection whose HELLO was left unanswered (crossing dials) is checked against
# peers[pc->peer] with pc->peer still -1
/^kvxd_pending_on_event(/,/^}/ s/^\t\tif (pc->peer < 0) {$/\t\tif (0) {/
