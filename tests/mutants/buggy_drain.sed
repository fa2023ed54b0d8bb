# the drain ignores the errored QPs: ACK while their siblings may still flush
s/^\tif (room_outstanding(r) == 0 \&\& err_qpcs_quiescent(r)) {$/\tif (room_outstanding(r) == 0) {/
