# the gather ignores the QP's scatter-gather limit (the device refuses the WR)
s/if (k == q->max_sge)/if (k == KVX_VX_MAX_SGE)/
