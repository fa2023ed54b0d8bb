# an iteration takes every ready room, not KVXD_BATCH: the messages it may produce are beyond what OUTBOX_RESERVE keeps free
s/ && visited < KVXD_BATCH; r = next) {$/; r = next) {/
