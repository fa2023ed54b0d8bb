# a batch's reply that arrives while libkvx still sends the batch (the submission ring is full
# and it reads what kvxd sent meanwhile) is dropped as a late reply
s/^\t\tbool of_batch = c->bsent \&\&/\t\tbool of_batch = !c->batching \&\& c->bsent \&\&/
