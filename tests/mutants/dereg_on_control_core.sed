# a pool's deregistration runs on the control core, as before the deregistration worker: the
# kernel's unpinning of every page holds every engine, peer and abort of the node meanwhile
s/^\tif (d->vwork.started \&\& (j = calloc(1, sizeof(\*j)))) {$/\tif (false \&\& (j = calloc(1, sizeof(*j)))) {/
