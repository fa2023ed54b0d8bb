# SPDX-License-Identifier: Apache-2.0
"""An SGLang-shaped KV connector over kvx.

The classes have the shapes of SGLang's disaggregation base classes
(sglang/srt/disaggregation/base/conn.py: KVArgs, KVPoll, KVManager, KVSender, KVReceiver), so a
scheduler written against them drives kvx the same way.  What maps to what, and what an engine
must change (its KV lives in host memory, in the manager's memfd pool), is in python/README.md.

Semantics kvx guarantees and this connector keeps:
  - poll() never blocks: it drains the connection's events with a timeout of 0.
  - A receiver's pages are the engine's again only once kvxd said RELEASED (or SUCCESS): a
    failed or aborted receiver's poll() returns Failed only after RELEASED, never at FAILED
    (until then a source may still be writing into them).  Meanwhile it returns Transferring.
  - A sender's source pages are free at its room's SUCCESS or FAILED (no WRITE outstanding).
  - failure_exception() raises KVTransferError carrying the errno and kvxd's reason.

Room shapes (DESIGN.md section 6), mapped from the two sides' tensor-parallel sizes
(KVArgs.tp_rank, tp_size, and the other side's TP size), heads split evenly across ranks:
  - every TP rank connects as its own kvx rank and uses the same bootstrap room id;
  - prefill TP P >= decode TP D: decode rank d has the sources prefill ranks d*P/D ..
    (d+1)*P/D - 1, each writing its whole page into its own slice of the decode page;
  - P < D: decode rank d takes its slice of prefill rank d*P/D's page, and each prefill room
    feeds D/P decode ranks (fan-out, ndest);
  - an auxiliary region (aux_index: first output token, hidden states, ...) with its own item
    size, written with a rank's last chunk by the first source of each decode rank;
  - send() once per chunk, and per layer too (layers=(first, count) of the pool's buffers):
    layer-wise transfer.
"""

import enum
import errno as _errno
import threading
import time
from typing import Dict, List, Optional, Sequence, Union

import kvx


def _pages(kv_indices):
    """SGLang hands page indices as numpy int32/int64 arrays; kvx takes uint32 buffers (or
    sequences of ints).  A numpy array is checked and converted; anything else goes as is
    (kvx checks it)."""
    if type(kv_indices).__module__ == "numpy" and hasattr(kv_indices, "astype"):
        import numpy

        a = numpy.asarray(kv_indices)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise TypeError(f"kv_indices: a 1-D integer array, not {a.dtype} of {a.ndim} dims")
        if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFFFFFF):
            raise ValueError("kv_indices: page indices must be in 0..2^32-1")
        return numpy.ascontiguousarray(a, dtype=numpy.uint32)
    return kv_indices


class KVPoll:
    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


class DisaggregationMode(enum.Enum):
    PREFILL = "prefill"
    DECODE = "decode"


class KVTransferError(Exception):
    """A room failed: .room, .errno (positive, 0 if none was given) and .reason (kvxd's)."""

    def __init__(self, room: int, errno: int, reason: str):
        self.room, self.errno, self.reason = room, errno, reason
        name = _errno.errorcode.get(errno, str(errno))
        super().__init__(f"room {room}: {reason or 'failed'} ({name})")


class KVArgs:
    """What the manager needs.  SGLang's KVArgs carries device pointers (kv_data_ptrs); kvx
    instead hands the engine a host-memory pool it allocates (KVManager.pool) of nbufs buffers
    (e.g. K and V of every layer) of npages pages of page_size bytes (kv_item_len: this rank's
    heads), and an auxiliary pool (KVManager.aux_pool) of aux_count items of aux_item_len
    bytes when aux_item_len is set.  tp_rank and tp_size are this engine's; peer_tp_size the
    other side's (prefill: the decode TP size; decode: the prefill TP size)."""

    def __init__(self, kvx_socket: str, page_size: int, npages: int, nbufs: int,
                 engine_rank: int = 0, tp_size: int = 1, peer_tp_size: int = 1,
                 aux_item_len: int = 0, aux_count: int = 0):
        self.kvx_socket = kvx_socket
        self.page_size = page_size
        self.npages = npages
        self.nbufs = nbufs
        self.engine_rank = engine_rank
        self.tp_size = tp_size
        self.peer_tp_size = peer_tp_size
        self.aux_item_len = aux_item_len
        self.aux_count = aux_count
        for name in ("tp_size", "peer_tp_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= kvx.RANK_MAX:
                raise ValueError(f"{name} {v!r}: 1..{kvx.RANK_MAX}")
        big, small = max(tp_size, peer_tp_size), min(tp_size, peer_tp_size)
        if big % small:
            raise ValueError(f"TP sizes {tp_size} and {peer_tp_size}: one must divide the other")
        if not 0 <= engine_rank < tp_size:
            raise ValueError(f"engine_rank {engine_rank}: 0..{tp_size - 1}")
        if (aux_item_len == 0) != (aux_count == 0):
            raise ValueError("aux_item_len and aux_count: both set, or neither")


def _unsupported(what: str):
    raise NotImplementedError(f"{what}: not carried by kvx (pipeline and data-parallel ranks "
                              "are separate engines: give each its own kvx rank)")


# A receiver's pages go back to the engine on these room states, and on no other: FAILED is
# not one of them, since a source may still be writing until kvxd says RELEASED (kvx.h).
# (tests/python/mutants/release_on_failed.sed adds FAILED: the VM canary test must fail then.)
_RECEIVER_PAGES_BACK_ON = (kvx.State.RELEASED,)

# A call failed with these: the engine's session with kvxd is over (libkvx: kvxd went away, or
# more events came than it keeps).
_SESSION_GONE = (_errno.ECONNRESET, _errno.ENOBUFS)


class KVManager:
    """One per engine: the kvx connection, the pool, and the rooms in flight.  Events are read
    by whichever sender or receiver polls and handed to their rooms."""

    # A close that kvxd answers EBUSY leaves the id's attempt open there (kvx.h: an attempt a
    # refused chunk failed ends only with a close that is not answered EBUSY; until then that
    # id's chunks fail the rooms they open, and an engine with 256 such ids is disconnected).
    # Such ids are closed again by drain(), at most every _CLOSE_AGAIN_S, and before a room of
    # that id is registered.
    _CLOSE_AGAIN_S = 0.1

    def __init__(self, args: KVArgs, disaggregation_mode: Union[DisaggregationMode, str],
                 rank: Optional[int] = None):
        if rank is not None and rank != args.engine_rank:
            raise ValueError(f"rank {rank} is not KVArgs.engine_rank {args.engine_rank}")
        self.mode = DisaggregationMode(getattr(disaggregation_mode, "value",
                                               disaggregation_mode))
        self.args = args
        self.conn = kvx.connect(args.kvx_socket, rank=args.engine_rank)
        self.aux_pool = None
        try:
            self.pool = self.conn.pool(args.page_size, args.npages, args.nbufs)
            if args.aux_item_len:
                self.aux_pool = self.conn.pool(args.aux_item_len, args.aux_count, 1)
        except BaseException:
            if getattr(self, "pool", None) is not None:
                self.pool.close()
            self.conn.close()
            raise
        self._rooms: Dict[int, object] = {}
        self._lock = threading.Lock()  # _rooms
        self._drain_lock = threading.Lock()  # one drain at a time: events handed out in order
        self.unclaimed_events: List[kvx.Event] = []  # events of rooms nobody holds
        # ids whose close kvxd answered EBUSY -> when to close them again (_lock); closes and
        # registrations hold _close_lock (before _lock), so that a close meant for an ended
        # attempt never lands on a room of the same id registered meanwhile
        self._close_again: Dict[int, float] = {}
        self._close_lock = threading.Lock()

    @property
    def node_name(self) -> str:
        return self.conn.node_name

    def _register(self, room: int, who) -> None:
        with self._close_lock:
            with self._lock:
                if room in self._rooms:
                    raise ValueError(f"room {room} is already in flight on this manager")
                again = room in self._close_again
            if again:  # a new attempt of the id: the old one is closed first
                try:
                    self._close_ids([room])
                except kvx.Error:
                    pass  # kvxd is gone: the room's own calls report it
            with self._lock:
                if room in self._rooms:
                    raise ValueError(f"room {room} is already in flight on this manager")
                self._rooms[room] = who

    def _close_later(self, room: int) -> None:
        """Close the id at the next drain (_close_again_due), unless a room of it is registered
        by then (that room closes it when it ends)."""
        with self._lock:
            self._close_again.setdefault(room, time.monotonic())

    def _forget(self, room: int) -> None:
        """The room ended for good: drop kvxd's bookkeeping and ours."""
        with self._close_lock:  # no new room of the id between the two
            with self._lock:
                self._rooms.pop(room, None)
            self._close_ids([room])

    def _close_ids(self, rooms) -> None:
        """Close each id at kvxd (the caller holds _close_lock).  ENOENT: never opened here (a
        sender's room that failed before its first chunk reached kvxd), or closed already.
        EBUSY: what kvxd holds under the id now is another attempt's (decode opened it again),
        not ours to close, or our failed sender's room, still running until decode's end fails
        it; ours ended all the same, and the id is closed again
        _CLOSE_AGAIN_S later.  So is one whose close timed out (ETIMEDOUT: kvxd slow, the
        session still there).  Raising on either would stop the drain that hands other rooms
        their events."""
        for room in rooms:
            try:
                self.conn.close_room(room)
            except kvx.Error as e:
                if e.errno in (_errno.EBUSY, _errno.ETIMEDOUT):
                    with self._lock:
                        self._close_again[room] = time.monotonic() + self._CLOSE_AGAIN_S
                    continue
                if e.errno != _errno.ENOENT:
                    raise
            with self._lock:
                self._close_again.pop(room, None)

    def _close_again_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            if not any(t <= now for t in self._close_again.values()):
                return
        # poll() never waits here: a thread that registers a room holds the lock for a round
        # trip, and the next drain tries again
        if not self._close_lock.acquire(blocking=False):
            return
        try:  # no room of these ids registered until they are closed
            with self._lock:
                # a registered room of the id closes it itself when it ends
                rooms = [r for r, t in self._close_again.items()
                         if t <= now and r not in self._rooms]
            if rooms:
                self._close_ids(rooms)
        finally:
            self._close_lock.release()

    def drain(self) -> None:
        """Read every event ready now (never waits for one) and hand each to its room, in
        order.  One thread drains at a time; a second one returns at once (the first hands
        out everything).  A room that ended is closed here (a round trip to the local kvxd), and
        ids whose close kvxd answered EBUSY are closed again (_CLOSE_AGAIN_S)."""
        if not self._drain_lock.acquire(blocking=False):
            return
        try:
            while True:
                evs = self.conn.read_events(256, 0)
                if not evs:
                    break
                for ev in evs:
                    with self._lock:
                        who = self._rooms.get(ev.room)
                    if who is None:
                        self.unclaimed_events.append(ev)
                    else:
                        who._on_event(ev)
            self._close_again_due()
        finally:
            self._drain_lock.release()

    def rooms_in_flight(self) -> int:
        with self._lock:
            return len(self._rooms)

    def close(self) -> None:
        try:
            if self.aux_pool is not None:
                self.aux_pool.close()
            self.pool.close()
        finally:
            self.conn.close()

    # ---- the TP mapping (see the module's docstring) ----

    def decode_sources(self, prefill_node: str):
        """Decode: this rank's sources, as kvx.Source with the K/V region's slice (and whole
        pages for the aux region)."""
        a = self.args
        d, dn, pn = a.engine_rank, a.tp_size, a.peer_tp_size
        if pn >= dn:
            per = pn // dn  # prefill ranks per decode rank: whole source pages, our slices
            sub = a.page_size // per
            if sub * per != a.page_size:
                raise ValueError(f"page_size {a.page_size} does not split into {per} ranks")
            return [kvx.Source(prefill_node, d * per + j,
                               [kvx.Slice(0, j * sub, sub) if per > 1 else None])
                    for j in range(per)]
        per = dn // pn  # decode ranks per prefill rank: our slice of its page
        return [kvx.Source(prefill_node, d // per,
                           [kvx.Slice((d % per) * a.page_size, 0, a.page_size)])]

    def prefill_ndest(self) -> int:
        """Prefill: how many decode ranks each of this rank's rooms feeds."""
        return max(1, self.args.peer_tp_size // self.args.tp_size)

    def prefill_sends_aux(self) -> bool:
        """Prefill: does this rank write the aux item (the first source of each destination)?"""
        a = self.args
        per = a.tp_size // a.peer_tp_size
        return per <= 1 or a.engine_rank % per == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Room:
    def __init__(self, mgr: KVManager, room: int):
        if isinstance(room, bool) or not isinstance(room, int) or not 0 <= room <= kvx.ROOM_ID_MAX:
            raise ValueError(f"bootstrap_room must be an int in 0..{kvx.ROOM_ID_MAX}")
        self.mgr = mgr
        self.room = room
        self._state = KVPoll.Bootstrapping
        self._errno = 0
        self._reason = ""

    def _move(self, state) -> bool:
        """A state the room's own call reached (init, send, abort): taken unless the room ended
        meanwhile (another thread's drain may hand it its end while the call waits for kvxd).
        Returns whether it was taken."""
        with self.mgr._lock:
            if self._state in (KVPoll.Success, KVPoll.Failed):
                return False
            self._state = state
            return True

    def _fail_now(self, err: int, reason: str) -> None:
        """The room's own call failed it (nothing of it can still write into pages of ours),
        unless it ended meanwhile."""
        with self.mgr._lock:
            if self._state not in (KVPoll.Success, KVPoll.Failed):
                self._errno, self._reason = err, reason
                self._state = KVPoll.Failed

    def _end(self, state) -> None:
        """The room's end, from kvxd's event (the drain)."""
        with self.mgr._lock:
            self._state = state

    def _fail_reason(self, ev: kvx.Event) -> None:
        if ev.error and not self._errno:
            self._errno = ev.errno
        if ev.reason and not self._reason:
            self._reason = ev.reason

    def poll(self) -> int:
        """The room's KVPoll state.  Never blocks."""
        if self._state not in (KVPoll.Success, KVPoll.Failed):
            self.mgr.drain()
        return self._state

    def failure_exception(self):
        raise KVTransferError(self.room, self._errno, self._reason)


class KVSender(_Room):
    """Prefill: send a room's KV pages (of the manager's pool) to the decode side."""

    def __init__(self, mgr: KVManager, bootstrap_addr: Optional[str], bootstrap_room: int,
                 dest_tp_ranks: Optional[Sequence[int]] = None, pp_rank: int = 0):
        if pp_rank != 0:
            _unsupported("pp_rank")
        super().__init__(mgr, bootstrap_room)
        # dest_tp_ranks: the decode ranks this room feeds; kvx takes their number (fan-out)
        self.ndest = mgr.prefill_ndest() if dest_tp_ranks is None else len(dest_tp_ranks)
        if not 1 <= self.ndest <= kvx.MAX_DESTS:
            raise ValueError(f"{self.ndest} decode ranks: a room feeds 1..{kvx.MAX_DESTS}")
        # bootstrap_addr names no server: kvxd already knows its decode peers, and the room's
        # metadata comes from the decode side (ROOM_META); kept for SGLang's signature
        self.bootstrap_addr = bootstrap_addr
        self._num: Optional[int] = None
        self._sent = 0
        self._chunk = 0
        self._aux: Optional[int] = None
        self._layers_done = 0
        self._layer_start = 0
        # the pages whose every buffer went (one byte each) and how many: the chunk that
        # completes the last of them is the room's last, whatever order the slices come in
        self._done = bytearray()
        self._ndone = 0
        mgr._register(bootstrap_room, self)

    def init(self, num_kv_indices: int, aux_index: Optional[int] = None) -> None:
        if aux_index is not None and self.mgr.aux_pool is None:
            raise ValueError("aux_index without an aux pool (KVArgs.aux_item_len)")
        if not 1 <= num_kv_indices <= kvx.MAX_ROOM_PAGES:
            raise ValueError(f"num_kv_indices {num_kv_indices}: 1..{kvx.MAX_ROOM_PAGES}")
        self._num = num_kv_indices
        self._aux = aux_index if self.mgr.prefill_sends_aux() else None
        self._layers_done = 0
        self._done = bytearray(num_kv_indices)
        self._ndone = 0
        # kvx takes chunks before the decode side's metadata arrives: input is welcome now
        self._move(KVPoll.WaitingForInput)

    def send(self, kv_indices, index_slice: Optional[slice] = None,
             layers: Optional[Sequence[int]] = None) -> None:
        """One chunk: kv_indices (pages of the pool) go to the room's pages index_slice (by
        default, right after the previous chunk), in every buffer, or, layer by layer, in the
        buffers layers = (first, count) of the pool.  The chunk after which every page of the
        room went, in the pool's last buffer, is the last (with the aux item, when there is
        one), in whatever order the slices come.  Failures show in poll()."""
        if self._num is None:
            raise RuntimeError("send() before init()")
        if self._state in (KVPoll.Success, KVPoll.Failed):
            return  # the room already ended (failed): nothing more goes out
        n = len(kv_indices)
        if layers is None:
            b0, nb = 0, self.mgr.args.nbufs
            if self._layers_done:
                raise ValueError("send() of every buffer after layer-wise chunks")
            start = self._sent if index_slice is None else index_slice.start
        else:
            b0, nb = layers
            if b0 != self._layers_done % self.mgr.args.nbufs or nb < 1 or \
                    b0 + nb > self.mgr.args.nbufs:
                raise ValueError(f"layers {tuple(layers)}: the next are from buffer "
                                 f"{self._layers_done % self.mgr.args.nbufs}, up to "
                                 f"{self.mgr.args.nbufs}")
            start = (self._sent if b0 == 0 else self._layer_start) \
                if index_slice is None else index_slice.start
        if index_slice is not None and index_slice.stop - index_slice.start != n:
            raise ValueError(f"index_slice {index_slice} does not hold {n} pages")
        if start < 0 or start + n > self._num:
            raise ValueError(f"pages {start}..{start + n} pass num_kv_indices {self._num}")
        if self._ndone == self._num:
            raise ValueError("every page of the room was sent: its last chunk went")
        # pages this chunk completes (its buffers reach the pool's last one): the last chunk is
        # the one after which every page is complete (slices may come in any order; kvxd fails
        # a room that gets a chunk after its last)
        newly = 0
        if b0 + nb == self.mgr.args.nbufs:
            newly = n - sum(self._done[start:start + n])
        last = self._ndone + newly == self._num
        chunks = [kvx.Chunk(self.room, self._chunk, self.mgr.pool, _pages(kv_indices), start,
                            last and self._aux is None, region=0, buf_first=b0,
                            buf_count=nb, ndest=self.ndest)]
        if last and self._aux is not None:
            chunks.append(kvx.Chunk(self.room, self._chunk + 1, self.mgr.aux_pool,
                                    [self._aux], 0, True, region=1, ndest=self.ndest))
        try:
            self.mgr.conn.submit_many(chunks)
        except kvx.Error as e:  # kvxd gone, or the submission failed part-way
            # Failed now: libkvx sends no chunk after the one that failed, and a call's last
            # chunk is the room's last, so that never went and the room cannot succeed (a WRITE
            # of it still reading the source pages feeds a decode room that fails and gets its
            # pages back only once nothing writes).  kvxd may still hold the room (earlier
            # chunks, or this call's part-way) until decode's end fails it: the id is closed,
            # again until kvxd takes the close (_close_ids: EBUSY while the room lives); it
            # stayed at kvxd unclosed, its events unclaimed
            self._fail_now(e.errno, e.strerror)
            try:
                self.mgr._forget(self.room)  # a close that times out is tried again later
            except kvx.Error:
                pass  # the session is over (_forget let ours go first), and the room with it
            return
        self._chunk += len(chunks)
        if newly:
            self._done[start:start + n] = b"\x01" * n
            self._ndone += newly
        if layers is not None:
            self._layer_start = start
            self._layers_done += nb
            if b0 + nb == self.mgr.args.nbufs:  # every layer of these pages went
                self._sent = start + n
        else:
            self._sent = start + n
        if not self._move(KVPoll.Transferring):
            # the room ended (a drain handed it FAILED and closed its id) while these chunks
            # were on their way: they may have opened it again at kvxd, for nobody to close
            self.mgr._close_later(self.room)

    def _on_event(self, ev: kvx.Event) -> None:
        if ev.state == kvx.State.SUCCESS:
            self._end(KVPoll.Success)
            self.mgr._forget(self.room)
        elif ev.state == kvx.State.FAILED:
            # a prefill room's FAILED comes once it drained: no WRITE of it is outstanding
            self._fail_reason(ev)
            self._end(KVPoll.Failed)
            self.mgr._forget(self.room)


class KVReceiver(_Room):
    """Decode: receive a room's KV pages into pages of the manager's pool."""

    def __init__(self, mgr: KVManager, bootstrap_addr: str, bootstrap_room: int,
                 prefill_dp_rank: Optional[int] = None):
        if prefill_dp_rank not in (None, 0):
            _unsupported("prefill_dp_rank")
        super().__init__(mgr, bootstrap_room)
        # bootstrap_addr: the kvx node name of the prefill engine that will write the room;
        # its ranks and their slices follow from the two TP sizes (KVManager.decode_sources)
        if not isinstance(bootstrap_addr, str):
            raise TypeError("bootstrap_addr: the prefill side's kvx node name")
        self.sources = mgr.decode_sources(bootstrap_addr)
        self.generation: Optional[int] = None
        self.abort_generation: Optional[int] = None
        self._opened = False
        self._maybe_open = False  # an open that timed out, and an abort kvxd did not answer
        self._released = False

    def init(self, kv_indices, aux_index: Optional[int] = None) -> None:
        if aux_index is not None and self.mgr.aux_pool is None:
            raise ValueError("aux_index without an aux pool (KVArgs.aux_item_len)")
        if self._state != KVPoll.Bootstrapping:
            raise RuntimeError("init() twice")
        regions = [kvx.Region(self.mgr.pool, _pages(kv_indices))]
        if aux_index is not None:
            regions.append(kvx.Region(self.mgr.aux_pool, [aux_index]))
        self.mgr._register(self.room, self)
        try:
            self.generation = self.mgr.conn.open_room_regions(self.room, regions, self.sources)
        except kvx.Error as e:  # not opened: kvxd holds nothing, the pages stay the engine's
            if e.errno == _errno.ETIMEDOUT and self._opened_after_all(e):
                return
            with self.mgr._lock:
                self.mgr._rooms.pop(self.room, None)
            self._fail_now(e.errno, e.strerror)
            return
        except BaseException:
            with self.mgr._lock:
                self.mgr._rooms.pop(self.room, None)
            raise
        self._opened = True
        self._move(KVPoll.WaitingForInput)

    def _opened_after_all(self, e: kvx.Error) -> bool:
        """The open timed out, and kvxd may have opened the room all the same (kvx.h): then a
        source may write into its pages, which are not the engine's until RELEASED.  Abort it to
        find out: unknown (ENOENT), it was not opened; aborted, or succeeded already (EALREADY),
        it was, and its end comes as any room's.  Returns whether it may be open."""
        try:
            self.abort_generation = self.mgr.conn.abort(self.room)
        except kvx.Error as e2:
            if e2.errno == _errno.ENOENT or e2.errno in _SESSION_GONE:
                return False
            if e2.errno != _errno.EALREADY:
                # kvxd does not answer: it may hold the room, so the pages stay its (the room
                # waits for an event, as an open one would, or for the engine's abort())
                self.abort_generation = None
                self._maybe_open = True
        self._opened = True
        with self.mgr._lock:
            if not self._errno:
                self._errno, self._reason = e.errno, "the open timed out: " + e.strerror
        self._move(KVPoll.Transferring)
        return True

    def abort(self) -> None:
        """Abort the room.  poll() says Failed once kvxd released the pages (or Success if the
        last delivery won the race)."""
        if self._state in (KVPoll.Success, KVPoll.Failed) or self.abort_generation is not None:
            return
        if not self._opened:  # nothing was opened: nothing can write into the pages
            self._fail_now(_errno.ECANCELED, "aborted before init")
            return
        try:
            self.abort_generation = self.mgr.conn.abort(self.room)
        except kvx.Error as e:
            if e.errno == _errno.ENOENT and self._maybe_open:
                # the open that timed out never reached kvxd: nothing can write into the pages
                with self.mgr._lock:
                    self.mgr._rooms.pop(self.room, None)
                self._fail_now(_errno.ETIMEDOUT, "the open timed out and never reached kvxd")
                return
            if e.errno != _errno.EALREADY:  # EALREADY: it succeeded, SUCCESS is on its way
                raise
            return
        if not self._errno:
            self._errno, self._reason = _errno.ECANCELED, "aborted by the engine"
        self._move(KVPoll.Transferring)

    def _on_event(self, ev: kvx.Event) -> None:
        if ev.state in (kvx.State.WAITING_FOR_INPUT, kvx.State.TRANSFERRING):
            self._move(KVPoll.WaitingForInput if ev.state == kvx.State.WAITING_FOR_INPUT
                       else KVPoll.Transferring)
            return
        if ev.state in (kvx.State.FAILED, kvx.State.DRAINING):
            self._fail_reason(ev)
            self._move(KVPoll.Transferring)  # a source may still write: not ours yet
        if ev.state in _RECEIVER_PAGES_BACK_ON and self._state != KVPoll.Success:
            self._end(KVPoll.Failed)
        if ev.state == kvx.State.SUCCESS:
            self._end(KVPoll.Success)
            self.mgr._forget(self.room)
        elif ev.state == kvx.State.RELEASED:
            self._released = True
            self.mgr._forget(self.room)
