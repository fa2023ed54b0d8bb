# the QP_INFO GID is not checked
s/if (gid_ok(&d->cfg.peers\[p->idx\], ri->rail\[k\].gid, k))$/if (1)/
