# target: python/kvx/connectors/sglang.py
# The bug: a sender whose submission failed part-way goes on sending: the room can succeed
# without the pages that did not go
s/^        if self._state in (KVPoll.Success, KVPoll.Failed) or self._stopped:$/        if self._state in (KVPoll.Success, KVPoll.Failed):/
