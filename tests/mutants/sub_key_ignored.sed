# the room table hashes and compares the key only: rooms of two ranks with one id are one room
s/^\treturn n->key == k->key \&\& n->sub == k->sub;$/\treturn n->key == k->key;/
s/^\tv3 ^= sub;$/\tv3 ^= 0;/
s/^\tv0 ^= sub;$/\tv0 ^= 0;/
