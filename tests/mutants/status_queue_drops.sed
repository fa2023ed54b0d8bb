# the ROOM_STATUS queue drops a failure at its bound (the old code)
s/^\t\tvoid \*nb = realloc(p->pend_status, sizeof(\*p->pend_status) \* (size_t)cap);$/\t\tvoid *nb = cap <= STATUS_QUEUE_MAX ? realloc(p->pend_status, sizeof(*p->pend_status) * (size_t)cap) : NULL;/
