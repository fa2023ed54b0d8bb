# every pass takes the submission rings from the first session on: while they are held, the room the cores free goes to the first session's flood, and the others starve
s/^\td->rings_next = n ? (d->rings_next + 1) % n : 0;$/\td->rings_next = 0;/
