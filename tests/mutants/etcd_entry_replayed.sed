# an entry older than the one taken (a replay of a node's earlier entry) is taken
s/^\telse if ((p = kvxd_peer_find(d, name)) \&\& p->discovered \&\& epoch < p->etcd_epoch)$/\telse if ((p = kvxd_peer_find(d, name)) \&\& p->discovered \&\& 0)/
