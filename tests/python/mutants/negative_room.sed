# target: python/kvx/_kvx.c
# A negative room id is let through (it reaches libkvx as a 64-bit id past KVX_ROOM_ID_MAX).
s/get_i64(o, "room", 0, (int64_t)KVX_ROOM_ID_MAX, &v)/get_i64(o, "room", INT64_MIN, (int64_t)KVX_ROOM_ID_MAX, \&v)/
