# a tombstone holds only while its room has not ended: an ended room's id is taken as reused by the aborting endpoint's late ROOM_META of the generation it aborted
/^on_room_meta(/,/^}/ s/^\tif (r \&\& r->tomb_peer == p->idx + 1 \&\& r->tomb_rank == rm->dst_rank \&\&$/\tif (r \&\& !kvx_room_state_terminal(kvxd_room_state(r)) \&\& r->tomb_peer == p->idx + 1 \&\& r->tomb_rank == rm->dst_rank \&\&/
