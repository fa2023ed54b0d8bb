# every WRITE goes on the first rail: the others idle
s/^\t\t\tc->stripe = (c->stripe + (uint32_t)k + 1) % c->nrails;$/\t\t\tc->stripe = 0;/
