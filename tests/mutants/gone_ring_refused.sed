# a session that went has its held ring's chunks offered to a full inbox like any other's: refused, they fail rooms whose last chunk it had submitted
s/^\tif (e->gone ? kvx_pcore_send(\&d->cores\[r->pc.core\], \&msg)$/\tif (0 ? kvx_pcore_send(\&d->cores[r->pc.core], \&msg)/
