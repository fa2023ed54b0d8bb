# send() tested for 0 (the old check): a delivered message reads a stale errno
s/^\t\tif (n == (ssize_t)len) {$/\t\tif (n == 0) {/
