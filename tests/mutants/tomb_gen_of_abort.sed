# a tombstone remembers the abort's own generation instead of the one its ROOM_META carries: that ROOM_META, arriving late, is taken and the room written
s/r->tomb_gen = a->open_gen; \/\* its ROOM_META's, not the abort's \*\//r->tomb_gen = a->gen;/
