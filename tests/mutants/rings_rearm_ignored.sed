# kvxd wakes an engine that asked for KVX_ENG_RINGS_REARM after every batch
s/, m\.flags \& KVX_ENG_RINGS_REARM);$/, false);/
