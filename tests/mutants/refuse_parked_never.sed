# a prefill room's end does not refuse the endpoints whose metadata waits (parked)
s/^\t\t\tkvxd_room_meta_refuse_parked(d, r); \/\* waiting endpoints are told now \*\/$/\t\t\t(void)0;/
