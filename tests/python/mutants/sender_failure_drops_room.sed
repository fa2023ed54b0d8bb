# target: python/kvx/connectors/sglang.py
# The bug: a sender whose submission failed drops its room without closing it: kvxd keeps the
# room (its earlier chunks, or the call's part-way) and counts it (max_rooms_per_engine)
/^            self._fail_now(e.errno, e.strerror)$/,/^            return$/s/^                self.mgr._forget(self.room)  .*$/                self.mgr._rooms.pop(self.room, None)/
