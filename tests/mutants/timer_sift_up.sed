# the heap does not move an earlier deadline up: timers fire out of order
s/^\t\tif (th->h\[parent\]->due_ms <= t->due_ms)$/\t\tif (1)/
