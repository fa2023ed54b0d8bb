# every EVENT wakes a parked control core, even one its engine heard from the core ring
s/if (m.told == KVXD_TOLD_CORE && st != KVX_ROOM_FAILED && st != KVX_ROOM_RELEASED)$/if (false)/
