# target: python/kvx/connectors/sglang.py
# The bug: a receiver whose open and whose abort both timed out stays Transferring for good:
# the engine's own abort() raises ENOENT (kvxd never had the room) instead of failing it
s/^            if e.errno == _errno.ENOENT and self._maybe_open:$/            if False:/
