# a room end its core won but could not put into a full core ring is not sent on
s/tell_claimed(d, r, &ev);/;/
