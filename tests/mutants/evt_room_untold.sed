# libkvx takes from the event ring without waking kvxd that waits for room there
s/^\t\tkvx_shring_taken(&c->evt); \/\* kvxd may wait for the room \*\/$/\t\t(void)0;/
