# a HOLD_ASK is taken and ignored: the peer neither holds its WRITEs nor replaces the session, and the asker replaces it only at its bound, flushing them
s/^\t\t\t\thold_answer(d, p);$/\t\t\t\t(void)0;/
