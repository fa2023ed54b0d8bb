# the verbs worker never starts: a QP's moves to RTR and RTS run on the control core, which
# a blocked move stalls (the code before the worker)
s/^\t\trc = -pthread_create(&w->thread, NULL, worker, w);$/\t\treturn 0;/
