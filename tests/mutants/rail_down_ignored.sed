# a failed rail stays in the stripe: rooms wait for its QP (which the session never gets back
# without a replacement)
s/^\t\tif (c->rails_down\[m->peer\] \& (1u << rail))$/\t\tif (0)/
