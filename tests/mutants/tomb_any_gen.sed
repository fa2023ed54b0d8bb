# a tombstone refuses its endpoint's ROOM_META of any generation: the id opened again is refused, silently, and its room waits for its timeout
s/^\t    r->tomb_gen == rm->gen) {$/\t    1) {/
