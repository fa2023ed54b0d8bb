# an engine's socket is read whatever the cores' inboxes hold: a chunk on it that finds its core's inbox full is refused and fails its room
s/^\t\tif (!e->gone \&\& !cores_take(d)) {$/\t\tif (0) {/
