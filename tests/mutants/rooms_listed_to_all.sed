# "rooms" lists every room of the node to every engine: another engine's room ids (a claim away from its rooms) are told
s/\.engine = admin ? -2 : engine}/.engine = -2}/
s/^\t\tif (admin)$/\t\tif (true)/
