# target: python/kvx/connectors/sglang.py
# poll() waits for events (200 ms) instead of draining what is there.
s/evs = self.conn.read_events(256, 0)$/evs = self.conn.read_events(256, 200)/
