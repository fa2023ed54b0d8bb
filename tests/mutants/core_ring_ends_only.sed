# only a decode room's end takes the core ring; its earlier events go through the control core
s/if (r->role != KVX_ROOM_DECODE || r->evq_spilled)$/if (r->role != KVX_ROOM_DECODE || r->evq_spilled || !end)/
