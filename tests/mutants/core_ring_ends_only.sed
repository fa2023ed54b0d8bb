# only a room's end takes the core ring; its earlier events go through the control core
s/^\tif (r->evq_spilled)$/\tif (r->evq_spilled || !end)/
