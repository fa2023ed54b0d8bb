# a FAILED or RELEASED its engine heard from the core ring waits for the control core's next wake-up
s/if (m.told == KVXD_TOLD_CORE && st != KVX_ROOM_FAILED && st != KVX_ROOM_RELEASED)$/if (m.told == KVXD_TOLD_CORE)/
