# a range's answer in one chunk over the page's bound fails the read as malformed (etcd's gateway sends large answers so): it is never read with fewer entries
/^\t\t\t\t\/\* too large: a range's page is read with fewer entries \*\/$/{n;n;s/^\t\t\t\t\treturn -EMSGSIZE;$/\t\t\t\t\treturn -EPROTO;/}
