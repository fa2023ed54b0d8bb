# a prefill room never gets its engine's core ring: all its events go through the control core
s/^\tif (r->pc.core < e->nevq)$/\tif (r->pc.role == KVX_ROOM_DECODE \&\& r->pc.core < e->nevq)/
