# a descriptor past the first that a datagram brings is left open (the session is still closed): one leaked into kvxd per datagram
/if (nfds++ == 0 \&\& n > 0)/,/close(x);/s/^\t\t\t\t\tclose(x);$/\t\t\t\t\t(void)x;/
