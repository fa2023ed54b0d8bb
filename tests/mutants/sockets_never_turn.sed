# held sockets get no turn at the room the cores free: the rings take it at the start of every pass, and a held socket waits as long as any ring's flood lasts
s/bool cores = !(d->socks_held \&\& d->socks_turn);/bool cores = true;/
