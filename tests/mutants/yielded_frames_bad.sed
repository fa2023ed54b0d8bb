# a settled connection (crossing dials: ours won) is read like any pending one: the frames the
# peer's dial sends after its AUTH count as bad and close it, failing the peer's setup
/^kvxd_pending_on_event(/,/^}/ s/^\tif (pc->settled) { \/\* its peer gives this dial up: read and drop until it closes \*\/$/\tif (0) {/
