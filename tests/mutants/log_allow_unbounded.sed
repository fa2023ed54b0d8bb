# kvx_log_allow lets every line through
s/^\tif (l->logged >= per_s) {$/\tif (0) {/
