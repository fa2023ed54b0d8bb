# every refused chunk sends its room's core one more ROOM_FAIL (an engine's flood fills the inbox)
s/^\tagain = r->refused;$/\tagain = false;/
