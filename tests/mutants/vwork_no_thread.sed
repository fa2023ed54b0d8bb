# the verbs workers never start: a QP's moves to RTR and RTS (and a pool's registration) run
# on the control core, which a blocked move stalls (the code before the workers)
s/^\tfor (; rc == 0 \&\& n < total; n++) {$/\tfor (; rc == 0 \&\& n < 0; n++) {/
s/^\tw->started = true;$/\tw->started = false;/
