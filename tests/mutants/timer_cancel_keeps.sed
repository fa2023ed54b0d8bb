# cancelling leaves the timer in the heap: a cancelled deadline still fires
s/^\tif (!t->slot)$/\tif (1)/
