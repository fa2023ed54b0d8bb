# max_pinned_mb_per_uid is not enforced
s/^\tif (len > cap || pinned > cap - len) {$/\tif (0) {/
