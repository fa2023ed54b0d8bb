# target: python/kvx/connectors/sglang.py
# The bug: a state a room's own call reached is set whatever the room's state: it overwrites
# the end another thread's drain handed the room meanwhile (the room is gone from the manager)
/^    def _move(self, state) -> bool:$/,/^            return True$/s/^            if self._state in (KVPoll.Success, KVPoll.Failed):$/            if False:/
