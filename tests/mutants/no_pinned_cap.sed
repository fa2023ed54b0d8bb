# max_pinned_mb_per_uid is not enforced
s/^\tif (map > cap || pinned > cap - map) {$/\tif (0) {/
