# a polling core puts a decode SUCCESS into the core ring without winning the room's one tell
s/!atomic_compare_exchange_strong(&r->told, &no, true)/!(no = !no)/
