# target: python/kvx/_kvx.c
# An event read keeps the GIL while it waits.
/^Conn_event_read(/,/^}/{
/Py_BEGIN_ALLOW_THREADS;/d
/Py_END_ALLOW_THREADS;/d
}
