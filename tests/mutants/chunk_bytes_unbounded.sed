# an engine's chunks that kvxd holds (waiting for their room's metadata) are not bounded
/^chunk_submit(/,/^}/ s/^\tif (e->chunk_bytes + kvxd_chunk_bytes(m->npages) >$/\tif (0 \&\& e->chunk_bytes + kvxd_chunk_bytes(m->npages) >/
