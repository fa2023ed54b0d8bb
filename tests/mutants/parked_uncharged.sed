# metadata parked on other endpoints' rooms is charged to nobody: a peer parks beyond max_rooms_per_peer
s/^\td->peers\[m->peer\].parked_held++;$//
