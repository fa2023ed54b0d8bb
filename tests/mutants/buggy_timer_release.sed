# the timer alone releases (no fence)
/^\t\tif (!(r->fencing_mask \& bit) \&\& now >= r->release_deadline_ms) {$/i\		if (now >= r->release_deadline_ms) {\n\t\t\tr->fenced_mask |= bit;\n\t\t\tcontinue;\n\t\t}
