# every park arms every CQ again, armed or not (one system call per rail per park on rxe)
s/if (!c->cq_armed\[k\])/if (1)/
