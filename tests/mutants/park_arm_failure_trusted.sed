# a CQ whose arm failed is taken for armed: the core sleeps with nothing to wake it for that rail
s/c->cq_armed\[k\] = kvx_vx->cq_arm(c->cq\[k\]) == 0;/c->cq_armed[k] = kvx_vx->cq_arm(c->cq[k]) == 0 || 1;/
