# target: python/kvx/connectors/sglang.py
# The bug: an id whose close kvxd answered EBUSY is never closed again: kvxd keeps the attempt a
# refused chunk failed open, so the id's next chunks fail their rooms, and 256 such ids close the
# engine's session
s/^                        self._close_again\[room\] = time.monotonic() + self._CLOSE_AGAIN_S$/                        pass/
