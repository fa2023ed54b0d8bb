# target: python/kvx/connectors/sglang.py
# The bug: the drain waits for the close lock, which a thread registering a room holds across a
# round trip to kvxd: poll() blocks
s/^        if not self._close_lock.acquire(blocking=False):$/        if not self._close_lock.acquire():/
