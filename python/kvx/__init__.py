# SPDX-License-Identifier: Apache-2.0
"""kvx: move KV-cache pages between inference engines through the local kvxd.

The Pythonic face of libkvx (include/kvx/kvx.h); the C binding is kvx._kvx.

    import kvx
    with kvx.connect("/run/kvx/decode.sock") as conn:
        with conn.pool(page_size=4096, npages=64, nbufs=2) as pool:
            gen = conn.open_room(7, pool, pages=range(16), sources=["prefill"])
            for ev in conn.events(timeout=10):
                if ev.room == 7 and ev.state in (kvx.State.SUCCESS, kvx.State.RELEASED):
                    break
            conn.close_room(7)

Threads: a Conn may be shared between threads; its calls are serialised (libkvx takes one
thread at a time per connection), and every call that waits releases the GIL.

Errors: kvx.Error (an OSError: .errno, .strerror) for what libkvx or kvxd refused; TypeError
or ValueError for an argument refused before anything is sent.
"""

import enum
import errno
import mmap
import os
import time
from typing import Iterator, List, NamedTuple, Optional, Sequence, Union

from . import _kvx
from ._kvx import Error

__all__ = ["Error", "State", "Event", "Conn", "Pool", "PoolMemory", "Region", "Source", "Slice",
           "Chunk", "connect", "version"]

MAX_SOURCES = _kvx.MAX_SOURCES
MAX_REGIONS = _kvx.MAX_REGIONS
MAX_DESTS = _kvx.MAX_DESTS
RANK_MAX = _kvx.RANK_MAX
MAX_ROOM_PAGES = _kvx.MAX_ROOM_PAGES
ROOM_ID_MAX = _kvx.ROOM_ID_MAX
PAGE_SIZE_MAX = _kvx.PAGE_SIZE_MAX
POOL_BYTES_MAX = 64 << 30  # kvx_pool_register: -E2BIG over 64 GiB


class State(enum.IntEnum):
    """enum kvx_state: a room's state as engines see it."""

    BOOTSTRAPPING = 0
    WAITING_FOR_INPUT = 1
    TRANSFERRING = 2
    SUCCESS = 3
    FAILED = 4
    DRAINING = 5
    RELEASED = 6


class Event(NamedTuple):
    """struct kvx_event.  error is 0 or a negative errno (it explains FAILED); reason is
    kvxd's text for it, or ""."""

    room: int
    generation: int
    state: Union[State, int]
    error: int
    reason: str

    @property
    def errno(self) -> int:
        """The positive errno of a failure, or 0."""
        return -self.error if self.error < 0 else self.error


class Slice(NamedTuple):
    """Which bytes of each page a source writes (struct kvx_slice): bytes [src_offset,
    src_offset + length) of its page land at [dst_offset, dst_offset + length) of the
    destination page.  length 0 is the whole page (the usual case)."""
    src_offset: int = 0
    dst_offset: int = 0
    length: int = 0


class Region(NamedTuple):
    """A decode room's region (struct kvx_region): destination pages of one pool, for example
    the K/V pages, or an auxiliary buffer of its own item size in another pool."""
    pool: object  # a Pool, or a pool id
    pages: object  # page indices: a sequence of ints or a uint32 buffer


class Source(NamedTuple):
    """A source of a decode room (struct kvx_source): a prefill node and the engine rank on it,
    with its slice of each region (None, or fewer than the regions: whole pages)."""
    node: str
    rank: int = 0
    slices: Optional[Sequence[Optional[Slice]]] = None


class Chunk(NamedTuple):
    """A prefill chunk (struct kvx_chunk): src_pages of pool, in buffers [buf_first,
    buf_first + buf_count) (buf_count 0: to the pool's last buffer), to destination pages
    dst_offset.. of region `region`, for a room that feeds ndest decode endpoints."""
    room: int
    chunk_index: int
    pool: object
    src_pages: object
    dst_offset: int = 0
    last: bool = False
    region: int = 0
    buf_first: int = 0
    buf_count: int = 0
    ndest: int = 1


def version() -> str:
    """The loaded libkvx's version (kvx_version)."""
    return _kvx.version()


def _state(v: int) -> Union[State, int]:
    try:
        return State(v)
    except ValueError:  # a newer kvxd's state: keep the number
        return v


def _u32(name: str, v, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            v = v.__index__()
        except AttributeError:
            raise TypeError(f"{name} must be an int, not {type(v).__name__}") from None
    if not lo <= v <= 0xFFFFFFFF:
        raise ValueError(f"{name} out of range {lo}..{0xFFFFFFFF}")
    return v


class PoolMemory:
    """nbufs buffers of npages pages of page_size bytes in one memfd, mapped shared, laid out
    as kvx wants (buffer-major: page p of buffer b at (b * npages + p) * page_size).  Not yet
    registered: Conn.pool() registers one."""

    def __init__(self, page_size: int, npages: int, nbufs: int, name: str = "kvx-pool"):
        self.page_size = _u32("page_size", page_size, 64)
        self.npages = _u32("npages", npages, 1)
        self.nbufs = _u32("nbufs", nbufs, 1)
        if self.page_size % 64 or self.page_size > PAGE_SIZE_MAX:
            raise ValueError(f"page_size {self.page_size}: a multiple of 64 up to {PAGE_SIZE_MAX}")
        # Python ints do not wrap: this is the exact product, checked against kvx's bound
        self.nbytes = self.page_size * self.npages * self.nbufs
        if self.nbytes > POOL_BYTES_MAX:
            raise ValueError(f"pool of {self.nbytes} bytes: at most {POOL_BYTES_MAX}")
        self._fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self._fd, self.nbytes)
            self._map = mmap.mmap(self._fd, self.nbytes, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self.buffer = memoryview(self._map)

    def fileno(self) -> int:
        return self._fd

    def offset(self, buf: int, page: int) -> int:
        """Byte offset of page `page` of buffer `buf` in the memfd."""
        if not 0 <= buf < self.nbufs:
            raise IndexError(f"buffer {buf} out of range 0..{self.nbufs - 1}")
        if not 0 <= page < self.npages:
            raise IndexError(f"page {page} out of range 0..{self.npages - 1}")
        return (buf * self.npages + page) * self.page_size

    def page(self, buf: int, page: int) -> memoryview:
        """A writable view of page `page` of buffer `buf`."""
        off = self.offset(buf, page)
        return self.buffer[off:off + self.page_size]

    def array(self):
        """The pool as a numpy uint8 array of shape (nbufs, npages, page_size), sharing the
        memory.  Needs numpy (optional: ImportError without it)."""
        import numpy

        return numpy.frombuffer(self._map, dtype=numpy.uint8).reshape(
            self.nbufs, self.npages, self.page_size)

    def close(self) -> None:
        """Unmap and close the memfd.  Views still held keep the mapping alive until they
        are released (mmap refuses to close under exported buffers)."""
        if self._fd < 0:
            return
        self.buffer.release()
        try:
            self._map.close()
        except BufferError:
            pass  # a view is still exported: the mapping goes with the last one
        os.close(self._fd)
        self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Pool(PoolMemory):
    """A PoolMemory registered with a Conn's kvxd (kvx_pool_register); .id is the pool id.
    close() unregisters it, then unmaps it."""

    def __init__(self, conn: "Conn", page_size: int, npages: int, nbufs: int):
        super().__init__(page_size, npages, nbufs)
        try:
            self.id = conn._c.pool_register(self._fd, self.page_size, self.npages, self.nbufs)
        except BaseException:
            super().close()
            raise
        self._conn = conn

    def close(self, busy_timeout: float = 5.0) -> None:
        """Unregister, then unmap.  kvxd refuses (EBUSY) while a room or a chunk still holds
        the pool; its polling cores drop those references shortly after the room ended (and
        was closed), so EBUSY is retried for up to busy_timeout seconds, then raised (the
        mapping is released either way; kvxd frees the pool when the connection closes).
        EIO: the NIC refused to deregister it; the pool is gone for this engine all the same
        (kvxd retries the deregistration), and the error is raised."""
        if self._fd < 0:
            return
        try:
            deadline = time.monotonic() + busy_timeout
            while not self._conn.closed:
                try:
                    self._conn._c.pool_unregister(self.id)
                    break
                except Error as e:
                    if e.errno != errno.EBUSY or time.monotonic() >= deadline:
                        raise
                time.sleep(0.01)
        finally:
            super().close()


def _pool_id(pool) -> int:
    return pool.id if isinstance(pool, Pool) else pool


def _pages(pages):
    return list(pages) if isinstance(pages, range) else pages


def _chunk_tuple(ch: Chunk) -> tuple:
    return (ch.room, ch.chunk_index, _pool_id(ch.pool), _pages(ch.src_pages), ch.dst_offset,
            bool(ch.last), ch.region, ch.buf_first, ch.buf_count, ch.ndest)


class Conn:
    """A connection to the local kvxd (kvx_connect_flags) as engine rank `rank` (the TP or PP
    rank of this process: rooms are keyed by room id and rank, so every rank of an engine uses
    the same room ids).  wake_ends=True (KVX_CONNECT_WAKE_ENDS): the connection's fd turns
    readable for replies and rooms' ends only; the states on the way come at the next read (for
    an engine that waits for its rooms' ends, not for WAITING_FOR_INPUT).  Close it (or use
    `with`)."""

    def __init__(self, path: Union[str, bytes, os.PathLike], rank: int = 0,
                 wake_ends: bool = False):
        self._c = _kvx.Conn(os.fsdecode(path), rank, bool(wake_ends))
        self.path = os.fsdecode(path)

    @property
    def rank(self) -> int:
        return self._c.rank

    @property
    def node_name(self) -> str:
        return self._c.node_name

    @property
    def closed(self) -> bool:
        return self._c.closed

    def close(self) -> None:
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fileno(self) -> int:
        """Readable when events may be ready: for selectors and asyncio's loop.add_reader."""
        return self._c.fileno()

    def pool(self, page_size: int, npages: int, nbufs: int) -> Pool:
        """A new memfd pool of nbufs x npages x page_size bytes, registered with kvxd."""
        return Pool(self, page_size, npages, nbufs)

    def open_room(self, room: int, pool: Union[Pool, int], pages, sources: Sequence[str]) -> int:
        """Decode: the room's data lands in `pages` of `pool`, written by `sources` (node
        names).  Returns the room's generation."""
        if isinstance(pages, range):
            pages = list(pages)
        if not isinstance(sources, (str, bytes)):
            sources = list(sources)  # a str is refused, not taken as a list of letters
        return self._c.room_open(room, _pool_id(pool), pages, sources)

    def open_room_regions(self, room: int, regions: Sequence[Region],
                          sources: Sequence[Source]) -> int:
        """Decode: a room of several regions (K/V pages, auxiliary buffers), written by sources
        named by node and rank, each with its slice of each region's pages (head slices between
        different TP sizes).  Returns the room's generation."""
        regs = [(_pool_id(r.pool), _pages(r.pages)) for r in regions]
        srcs = []
        for src in sources:
            if isinstance(src, str):
                src = Source(src)
            slices = None if src.slices is None else [
                None if sl is None else tuple(sl) for sl in src.slices]
            srcs.append((src.node, src.rank, slices))
        return self._c.room_open_regions(room, regs, srcs)

    def submit(self, room: int, chunk_index: int, pool: Union[Pool, int], src_pages,
               dst_offset: int = 0, last: bool = False, *, region: int = 0,
               buf_first: int = 0, buf_count: int = 0, ndest: int = 1) -> None:
        """Prefill: src_pages[i] of `pool` goes to destination page dst_offset + i of region
        `region`, in buffers [buf_first, buf_first + buf_count) (0: to the last buffer; one
        buffer per chunk is layer-wise transfer).  ndest: the decode endpoints the room feeds
        (every chunk of a room names the same).  Asynchronous: failures come as a FAILED
        event."""
        self._c.chunk_submitv([_chunk_tuple(Chunk(room, chunk_index, pool, src_pages,
                                                  dst_offset, last, region, buf_first,
                                                  buf_count, ndest))])

    def submit_many(self, chunks: Sequence[Chunk]) -> int:
        """Prefill: several chunks in one call (kvx_chunk_submitv: one wake-up of kvxd).
        Returns how many were queued; nothing is sent when one is refused locally."""
        return self._c.chunk_submitv([_chunk_tuple(ch) for ch in chunks])

    def abort(self, room: int) -> int:
        """Decode: abort a room; returns the abort generation.  The pages stay kvxd's until
        the RELEASED event (or SUCCESS, if the last delivery won the race)."""
        return self._c.room_abort(room)

    def close_room(self, room: int) -> None:
        """Forget a finished room (kvx_room_close): ENOENT unknown, EBUSY still draining."""
        self._c.room_close(room)

    def close_rooms(self, rooms: Sequence[int]) -> List[int]:
        """Forget several finished rooms in one call (kvx_room_closev: one round trip to kvxd
        for up to 64 of them).  Returns one status per room: 0, or -errno as close_room would
        raise it (-ENOENT unknown, -EBUSY still draining).  A broken session raises kvx.Error."""
        return self._c.room_closev(list(rooms))

    def admin(self, cmd: str) -> str:
        """An operator command ("rooms", "peers", "counters", ...): its reply text."""
        return self._c.admin(cmd)

    def read_events(self, max: int = 64, timeout_ms: int = 0) -> List[Event]:
        """Up to max events, waiting up to timeout_ms (-1: forever, 0: not at all)."""
        return [Event(r, g, _state(s), e, why)
                for (r, g, s, e, why) in self._c.event_read(max, timeout_ms)]

    def events(self, timeout: Optional[float] = None, max: int = 64) -> Iterator[Event]:
        """Events as they come.  Stops once `timeout` seconds pass without one (None: never
        stops).  Waits in slices of at most 100 ms so Ctrl-C gets through."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                slice_ms = 100
            else:
                left = deadline - time.monotonic()
                slice_ms = 0 if left <= 0 else min(100, int(left * 1000) + 1)
            evs = self.read_events(max, slice_ms)
            if evs:
                yield from evs
                if timeout is not None:
                    deadline = time.monotonic() + timeout
            elif deadline is not None and time.monotonic() >= deadline:
                return


def connect(path: Union[str, bytes, os.PathLike], rank: int = 0,
            wake_ends: bool = False) -> Conn:
    """Connect to the kvxd whose engine socket is at path, as engine rank `rank` (wake_ends:
    see Conn)."""
    return Conn(path, rank, wake_ends)
