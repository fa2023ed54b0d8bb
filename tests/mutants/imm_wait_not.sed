# a share whose rail went down posts its immediate at once, while the room's WRITEs are still
# in flight (on a replaced connection's QPs, nothing would order them before it)
s/^\tif (r->imm_waited \&\& room_outstanding(r) == 0)$/\tif (r->imm_waited)/
