# a source notified on a session that ended without failing counts as never notified: an abort
# before the next session releases the pages while the old QPs may still place a write
/^maybe_release(/,/^}/ s/ \&\& stale_sessions_gone(d, r))$/)/
