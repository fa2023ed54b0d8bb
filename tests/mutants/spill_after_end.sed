# a spilled state on the way is handed to the engine even after its room's end was told
s/^\t\t} else if (m->told == KVXD_TOLD_SPILL && atomic_load(&r->pc.told)) {$/\t\t} else if (m->told == KVXD_TOLD_SPILL \&\& 0) {/
