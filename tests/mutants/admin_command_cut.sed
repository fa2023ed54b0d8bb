# an operator command longer than kvxd keeps is cut to 255 bytes and run (both requests)
s/^\t\tif (n >= sizeof(cmd)) {$/\t\tn = n < sizeof(cmd) ? n : sizeof(cmd) - 1;\n\t\tif (0) {/
s/^\tif (n >= sizeof(cmd)) { \/\* never cut short and run \*\/$/\tn = n < sizeof(cmd) ? n : sizeof(cmd) - 1;\n\tif (0) {/
