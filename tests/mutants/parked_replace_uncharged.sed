# metadata that takes the place of the same endpoint's parked one (its slot's earlier peer's, charged to nobody now) is not charged to its peer
s/^\t\t\td->peers\[m->peer\].parked_held++;$/\t\t\t;/
