# libkvx never reads its core rings (events kvxd's polling cores put there are lost)
s/for (int k = 0; n == 0 && k < c->ncevt; k++) {/for (int k = 0; n == 0 \&\& k < 0; k++) {/
