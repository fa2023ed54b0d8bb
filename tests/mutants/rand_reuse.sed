# the buffer position never advances (and nothing is cleared): every draw returns the same bytes
s/	rbuf_left -= len;/	(void)0;/
/memset(rbuf + RAND_BUF - rbuf_left, 0, len);/d
