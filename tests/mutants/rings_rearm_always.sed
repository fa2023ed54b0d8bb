# kvxd takes every engine's parked flag with its wake-up, also one that never sets it again
s/, m\.flags \& KVX_ENG_RINGS_REARM);$/, true);/
