# a message's control characters written as they are: a newline in an engine's text forges a log line
s/^\t\tif (c >= 0x20 \&\& c != 0x7f) {$/\t\tif (1) {/
