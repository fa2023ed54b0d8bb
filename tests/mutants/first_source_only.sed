# a decode room joins only its first source's list: the loss of another source misses it
/^kvxd_decode_room_new(/,/^}/s/^\t\tpeer_link(d, r, (int)i, src_peer\[i\]);$/\t\tif (i == 0)\n&/
