# a slot emptied moves the end down to it, past sessions still in higher slots
s/while (d->engines_end > 0 \&\& !d->engines\[d->engines_end - 1\])/while (!e \&\& d->engines_end > i)/
