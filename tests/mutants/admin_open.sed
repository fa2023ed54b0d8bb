# every engine may run operator commands
s/^\tif (!admin) {$/\tif (0) {/
