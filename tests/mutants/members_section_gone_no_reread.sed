# a [peer] section removed by a reload does not have etcd read again: the node it kept from etcd is not found until the watch ends
s/^\t\td->members_reread = true;$/\t\t;/
