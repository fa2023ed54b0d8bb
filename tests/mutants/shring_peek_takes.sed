# a peek takes the message it looked at: the get after it returns the next one, and the peeked request is never handled
s/return rec_read(r, buf, cap, false);/return rec_read(r, buf, cap, true);/
