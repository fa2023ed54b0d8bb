# target: python/kvx/connectors/sglang.py
# The bug: chunks submitted while a drain handed their room FAILED (and closed its id) are left:
# the room they may open again at kvxd is never closed
s/^        if not self._move(KVPoll.Transferring):$/        if self._move(KVPoll.Transferring) and False:/
