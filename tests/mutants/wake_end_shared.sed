# the engine is handed kvxd's own end of the event ring's wake pair (one file description, as a
# passed eventfd was): what the engine does to its flags, it does to kvxd's
s/^\tfds\[2\] = evt\[1\];$/\tfds[2] = dup(evt[0]);/
