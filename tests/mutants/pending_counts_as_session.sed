# every pending connection counts as a session, authenticated or not (connections that never
# authenticate make our dials wait for CQ room)
/^sessions_live(/,/^}/ s/^\treturn n;$/\treturn n + d->npending;/
