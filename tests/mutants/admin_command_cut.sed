# an operator command longer than kvxd keeps is cut to 255 bytes and run (both requests)
s/^\tif (n >= sizeof(cmd)) { \/\* never cut short and run: "fault a:1,b:2" is not "fault a:1" \*\/$/\tn = n < sizeof(cmd) ? n : sizeof(cmd) - 1;\n\tif (0) {/
s/^\tif (n >= sizeof(cmd)) { \/\* never cut short and run \*\/$/\tn = n < sizeof(cmd) ? n : sizeof(cmd) - 1;\n\tif (0) {/
