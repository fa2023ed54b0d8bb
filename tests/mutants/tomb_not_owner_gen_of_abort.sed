# an ABORT for a room made by its engine's chunk, with no endpoint's metadata yet, remembers the abort's own generation instead of its ROOM_META's: that ROOM_META, arriving late, is taken and the room written
/if (r->nowners == 0) {/,/}/s/r->tomb_gen = a->open_gen;.*/r->tomb_gen = a->gen;/
