# etcd.c: our own key deleted in etcd is not registered again
s/				e->reregister = true;/				;/
