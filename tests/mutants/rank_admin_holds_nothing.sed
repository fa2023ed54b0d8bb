# an operator's (root's) engine never holds its rank: any other user's engine on the rank takes its rooms
s/^\te->holds = true;$/\tif (!e->admin)\n\t\te->holds = true;/
s/^\tif (!rank_held_by_another(d, e))$/\tif (!e->admin \&\& !rank_held_by_another(d, e))/
