# the drain check keeps the room's quiescent errored QPs in its set and reads them again later
# (after the control core may have retired and freed them)
/^err_qpcs_quiescent(/,/^}/ s/^\tint n = 0;$/\tfor (int i = 0; i < r->nerr_qpc; i++)\n\t\tif (r->err_qpc[i]->sq_used || r->err_qpc[i]->chain_n)\n\t\t\treturn false;\n\treturn true;\n\tint n = 0;/
