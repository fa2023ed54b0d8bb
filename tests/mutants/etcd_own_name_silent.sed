# our own name listed with another value goes unsaid and uncounted
s/^\t\tif (clash \&\& !d->etcd->own_clash) {$/\t\tif (0) {/
