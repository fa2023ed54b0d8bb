# no source-address check, at accept or at HELLO
s/if (!addr_known(d, addr)) {/if (0) {/
s/if (!kvx_config_peer_addr_ok(&d->cfg.peers\[p->idx\], pc->addr)) {/if (0) {/
