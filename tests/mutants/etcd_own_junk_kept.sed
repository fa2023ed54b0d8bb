# our own key holding what is not base64 text is taken as any bad entry: never written again
s/^\tif (named \&\& strcmp(name, d->cfg.name) == 0) {$/\tif (named \&\& val \&\& strcmp(name, d->cfg.name) == 0 \&\& !b64_decode(vbuf, sizeof(vbuf), val)) {/
