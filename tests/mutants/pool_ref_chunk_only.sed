# a prefill room takes no pool reference of its own: its pool is held only by its chunks, whose
# references go back once their WRs are built, while the WRs may still read it
/^kvxd_room_hold_pool(/,/^}/ {
	/^\tr->src_pool\[r->nsrc_pool++\] = p;$/ d
	/^\tatomic_fetch_add(&p->refs, 1);$/ d
}
