# the ABORT does not name the generation its ROOM_META carried: the source's tombstone for a room it does not know refuses no ROOM_META
/^\tw.u.abort.open_gen = r->open_gen; \/\* the generation its ROOM_META carried \*\/$/d
