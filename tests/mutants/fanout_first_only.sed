# a chunk goes to the room's first destination only
s/^\t\t\twhile (r->post_d < r->ndest) {$/\t\t\twhile (r->post_d < 1) {/
