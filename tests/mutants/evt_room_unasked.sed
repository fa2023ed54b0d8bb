# kvxd that finds no room in an engine's event ring does not ask for a wake-up: what waits goes in only when something else wakes its loop
s/^\t\t\tif (e->rings && !asked && kvx_shring_starve(&e->evt)) {$/\t\t\tif (false) {/
