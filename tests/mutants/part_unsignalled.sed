# a part that does not finish its chunk is not signalled: its WRs are never retired, the send
# queue stays full and the chunk never finishes
s/^\t\t\tused\[k\]->chain\[used\[k\]->chain_n - 1\]\.signaled = true;$/\t\t\tused[k]->chain[used[k]->chain_n - 1].signaled = r->post_b >= ch->nbufs;/
