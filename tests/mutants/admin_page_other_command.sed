# engine.c: KVX_ENG_ADMIN_AT serves a later page of one command to a request for another
/^admin_at/,/^}/s/ || strcmp(cmd, e->admin_cmd) != 0 ||$/ ||/
