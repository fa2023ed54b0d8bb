# a second HELLO is taken: the session's rank changes under its rooms
s/^\t\tif (e->hello) {$/\t\tif (0) {/
