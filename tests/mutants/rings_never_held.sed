# submission rings are taken whatever the cores' inboxes hold: a chunk that finds its core's inbox full is refused and fails its room, whichever engine's flood filled it
s/^\t\tif (!e->gone \&\& (!cores || !cores_take(d))) {$/\t\tif (0) {/
