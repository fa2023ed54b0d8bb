# held sockets keep the turn once they had it: while any socket is held the rings take nothing that goes to the cores, and a socket engine's flood starves every ring engine
s/^\t\td->socks_turn = false; \/\* the sockets' turn ends once they are all let go \*\/$/\t\t;/
