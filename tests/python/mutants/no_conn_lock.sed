# target: python/kvx/_kvx.c
# Calls on one Conn are not serialised: libkvx is entered by two threads at once.
/^conn_enter(/,/^}/s/PyThread_acquire_lock(self->lock, [A-Z_]*)/1/
/^conn_enter(/,/^}/s/PyThread_release_lock(self->lock);/;/
/^conn_leave(/,/^}/s/PyThread_release_lock(self->lock);/;/
