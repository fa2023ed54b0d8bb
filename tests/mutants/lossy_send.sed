# a full inbox drops the message (the old kvx_pcore_send)
s/^\tif (c->ovf_len == 0 \&\&$/\tif (1)\n\t\treturn quiet ? kvx_mbox_put_quiet(c->inbox, m) : kvx_mbox_put(c->inbox, m);\n\tif (0 \&\&/
