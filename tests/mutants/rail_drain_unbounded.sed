# the retrying node waits for ever for its own WRITEs to end: one that never completes holds its next WRITEs to the peer until the session ends some other way
s/bool ours = p->rail_hold \&\& !p->hold_asked_ms \&\&$/bool ours = false \&\&/
