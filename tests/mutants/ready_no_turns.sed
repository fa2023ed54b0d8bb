# the ready rooms an iteration took that still wait stay in front: KVXD_BATCH rooms waiting for their connection hold back every room behind them
s/^\tif (r && kept) {$/\tif (0) {/
