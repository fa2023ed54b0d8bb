# the seed bug: a skipped chunk clears the room's count wholesale
/stat_add(&c->st.chunks_skipped, 1);/a\			atomic_store(\&r->wr_done, atomic_load(\&r->wr_posted));\n\t\t\tprefill_check_drained(c, r);
