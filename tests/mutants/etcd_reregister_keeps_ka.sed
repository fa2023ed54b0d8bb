# registering again after our key was deleted leaves the old lease's keepalive open
/^\t\t\te->reregister = false;$/,/^\t\t\treturn;$/{/^\t\t\thttp_close(d, &e->ka);$/d}
