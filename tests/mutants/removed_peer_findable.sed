# peer_io.c: a removed peer is still found by name while it is torn down (engines could name
# it, and adding it back finds the old slot)
s/if (!d->peers\[i\].vacant && !d->peers\[i\].removing &&/if (!d->peers[i].vacant \&\&/
