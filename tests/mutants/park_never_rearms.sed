# a CQ whose event the park took is never armed again: its next completion wakes nobody
/^			c->cq_armed\[k\] = false;$/d
