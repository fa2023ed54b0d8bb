# an EVENT the control core takes after it told the room's end goes to the engine all the same
s/^\t\t} else if (!atomic_load(&r->pc.told))$/\t\t} else/
