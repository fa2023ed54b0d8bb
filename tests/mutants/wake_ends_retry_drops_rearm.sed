# refused KVX_ENG_RINGS_WAKE_ENDS by an older kvxd, libkvx asks again without KVX_ENG_RINGS_REARM
# as well
s/^\t\tflags &= (flags & KVX_ENG_RINGS_WAKE_ENDS) ? ~KVX_ENG_RINGS_WAKE_ENDS$/\t\tflags \&= (flags \& KVX_ENG_RINGS_WAKE_ENDS) ? ~(KVX_ENG_RINGS_WAKE_ENDS | KVX_ENG_RINGS_REARM)/
