# the operator commands of a session that went are run: nobody reads their answers, and a ring of them taken at once at its end holds the control core
s/^\treturn e->gone;$/\treturn false;/
