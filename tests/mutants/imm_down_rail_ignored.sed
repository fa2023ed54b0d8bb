# the share's end is decided as if every rail it wrote on were up: it says two immediates, and
# the one of the rail that went down waits after all (two immediates where one would do)
s/^\t\t\t\twait = true;$/\t\t\t\t(void)0;/
