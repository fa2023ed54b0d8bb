# libkvx does not ask for KVX_ENG_RINGS_WAKE_ENDS when the engine connects with
# KVX_CONNECT_WAKE_ENDS
s/^\t\tflags |= KVX_ENG_RINGS_WAKE_ENDS;$/\t\tflags |= 0;/
