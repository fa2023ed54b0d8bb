# engine.c: KVX_ENG_ADMIN_AT serves an offset past the kept text (reads beyond it)
/^admin_at/,/^}/s/^		   m->offset > e->admin_text_len) {$/		   0) {/
