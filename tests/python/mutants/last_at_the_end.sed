# target: python/kvx/connectors/sglang.py
# The bug: the chunk that reaches num_kv_indices is the room's last, whatever pages are still
# missing (slices out of order): kvxd fails the room at the next chunk
s/^        last = self._ndone + newly == self._num$/        last = start + n == self._num and b0 + nb == self.mgr.args.nbufs/
