# [engine] rank_users set: the ranks it does not list are nobody's, any user's engine takes their rooms
/the configured user's, always \*\/$/{n;s/^\tfor (int i = 0; i < d->engines_end; i++) {$/\tif (d->cfg.n_rank_users)\n\t\treturn false;\n\tfor (int i = 0; i < d->engines_end; i++) {/}
