# our own key holding a forged or older entry is left so: the others list us where it says
s/^\t\te->reassert = true;$/\t\t;/
