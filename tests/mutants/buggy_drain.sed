# the drain ignores the errored QP: ACK while its siblings may still flush
/^\tif (room_outstanding(r) == 0 &&$/{N;s/.*/\tif (room_outstanding(r) == 0) {/}
