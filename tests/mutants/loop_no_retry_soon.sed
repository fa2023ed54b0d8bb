# the loop does not come back soon for messages waiting in a core's overflow ring
s/^\t\t\ttimeout_ms = timeout_ms > 1 ? 1 : timeout_ms; \/\* retry soon \*\/$/\t\t\t(void)0;/
