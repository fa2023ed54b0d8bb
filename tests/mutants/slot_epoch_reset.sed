# peer.c: a reused slot starts its epochs again (what was bound to the earlier peer matches)
s/	\*p = (struct kvxd_peer){.idx = i, .epoch = epoch, .slot_epoch = epoch};/	*p = (struct kvxd_peer){.idx = i};/
