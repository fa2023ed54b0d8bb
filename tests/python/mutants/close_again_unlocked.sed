# target: python/kvx/connectors/sglang.py
# The bug: the drain closes ids again without holding _close_lock: a new room of such an id can
# be registered (and its chunks sent) between the drain's check and its close, and that close
# then lands on the new room (removing it if kvxd had already failed it)
s/^        with self._close_lock:  # no room of these ids registered until they are closed$/        if True:/
