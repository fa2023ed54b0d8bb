# a chunk whose header length is not its message's is answered -EBADMSG and dropped: the session
# goes on, and the chunk's room can succeed without it
/^handle(/,/^}/ s/^\t\tif (len >= sizeof(\*h) \&\& h->type == KVX_ENG_CHUNK).*$/\t\tif (0)/
