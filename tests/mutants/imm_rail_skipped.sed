# a rail the share wrote on but the last chunk did not gets no immediate (no zero-length
# WRITE_WITH_IMM behind its WRITEs): decode waits for it until the room times out
0,/^\t\t\timm_write(c, r, m, q, imm);$/s//\t\t\t(void)imm_write;/
