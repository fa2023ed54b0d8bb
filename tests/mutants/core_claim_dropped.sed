# an event its core could not put into a full core ring is not sent on
s/tell_spilled(d, r, &ev, m->told == KVXD_TOLD_CLAIM);/;/
