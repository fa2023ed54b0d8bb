# the drain ignores the errored QPs: ACK while their siblings may still flush
s/^\tif (room_outstanding(r) == 0 \&\& qps_quiet) {$/\tif (room_outstanding(r) == 0) {/
