# SPDX-License-Identifier: Apache-2.0
"""A scripted stand-in for kvxd's engine socket (core/engine_proto.h), for the host-only tests
of the Python package: it speaks the socket protocol only (it refuses RINGS, as an older kvxd
does, so libkvx stays on the socket), records every request it gets, answers from a script and
pushes events on demand.  It moves no data: the VM tests (tests/python/vm) use real kvxd."""

import array
import errno
import os
import socket
import struct
import tempfile
import threading
import time

HDR = struct.Struct("=HHIQ")  # struct kvx_eng_hdr
REPLY = struct.Struct("=HHIQiIq")  # struct kvx_eng_reply (without its text)
EVENT = struct.Struct("=HHIQQIii96s4x")  # struct kvx_eng_event: hdr + struct kvx_event
NAME_MAX = 64
SOURCE_SIZE = NAME_MAX + 8 + 4 * 3 * 4  # struct kvx_eng_source: name, rank, pad, 4 slices
CHUNK_FIXED = 8 + 10 * 4  # struct kvx_eng_chunk after its header: room, 10 u32

HELLO, POOL_REG, POOL_UNREG, ROOM_OPEN, CHUNK, ROOM_CLOSE, ADMIN, ROOM_ABORT, RINGS = range(1, 10)
ADMIN_AT = 10  # paged admin replies: u64 offset, then the command
ADMIN_PAGE = 60000
T_REPLY, T_EVENT = 64, 65


class FakeKvxd:
    def __init__(self, node="fake"):
        self.node = node
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "kvxd.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(self.path)
        self.srv.listen(4)
        self.requests = []  # (type, dict) in arrival order, HELLO and RINGS excluded
        self.status = {}  # (type, room) -> -errno to answer (default: success)
        self.admin_replies = {}  # cmd -> (status, text)
        self.pool_sizes = []  # st_size of each memfd POOL_REG carried
        self.gen = 1
        self.hello = None  # HELLO's version and rank
        self.shapes = []  # ROOM_OPEN's regions, ranks, slices; CHUNK's region, buffers, ndest
        self.sock = None
        self.lock = threading.Lock()
        self.connected = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    # ---- test side ----
    def push_event(self, room, generation, state, error=0, reason=""):
        self.connected.wait(5)
        msg = EVENT.pack(T_EVENT, 0, EVENT.size, 0, room, generation, int(state), error,
                         reason.encode())
        with self.lock:
            self.sock.send(msg)

    def hang_up(self):
        """kvxd goes away: the session's socket is shut down."""
        self.connected.wait(5)
        self.sock.shutdown(socket.SHUT_RDWR)

    def count(self, type_):
        return sum(1 for t, _ in self.requests if t == type_)

    def wait_for(self, cond, timeout=5.0):
        """Wait until cond() (requests arrive asynchronously: chunks get no reply)."""
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() >= deadline:
                raise AssertionError("the fake kvxd never got what the test waited for")
            time.sleep(0.005)

    def close(self):
        try:
            self.srv.close()
            if self.sock:
                self.sock.close()
        finally:
            self.dir.cleanup()

    # ---- server side ----
    def _reply(self, seq, status=0, value=0, text=b""):
        msg = REPLY.pack(T_REPLY, 0, REPLY.size + len(text), seq, status, len(text), value) + text
        with self.lock:
            self.sock.send(msg)

    def _serve(self):
        # one session at a time; the next connection is served once the previous one ended
        while True:
            try:
                sock, _ = self.srv.accept()
            except OSError:
                return
            with self.lock:
                if self.sock:
                    self.sock.close()
                self.sock = sock
            self.connected.set()
            self._session()

    def _session(self):
        fds = array.array("i")
        while True:
            try:
                data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(4 * 8))
            except OSError:
                return
            if not data:
                return
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - len(cdata) % 4])
            type_, _, length, seq = HDR.unpack_from(data)
            body = data[HDR.size:]
            if type_ == HELLO:
                version, rank = struct.unpack_from("=II", body)
                self.hello = dict(version=version, rank=rank)
                self._reply(seq, 0, 0, self.node.encode())
            elif type_ == RINGS:
                self._reply(seq, -errno.EOPNOTSUPP)
            elif type_ == POOL_REG:
                page_size, npages, nbufs = struct.unpack_from("=III", body)
                size = -1
                while fds:
                    fd = fds.pop()
                    size = os.fstat(fd).st_size
                    os.close(fd)
                self.pool_sizes.append(size)
                self.requests.append((type_, dict(page_size=page_size, npages=npages,
                                                  nbufs=nbufs)))
                self._reply(seq, 0, len(self.pool_sizes))
            elif type_ == POOL_UNREG:
                (pool_id,) = struct.unpack_from("=i", body)
                self.requests.append((type_, dict(pool_id=pool_id)))
                self._reply(seq, self.status.get((type_, pool_id), 0))
            elif type_ == ROOM_OPEN:
                # engine protocol 2: room, nregions, nsources; regions (pool, npages);
                # sources (name, rank, pad, 4 slices of 3 u32); every region's pages
                room, nreg, nsrc = struct.unpack_from("=QII", body)
                off = 16
                regions = [struct.unpack_from("=iI", body, off + 8 * i) for i in range(nreg)]
                off += 8 * nreg
                srcs, ranks, slices = [], [], []
                for i in range(nsrc):
                    base = off + i * SOURCE_SIZE
                    srcs.append(body[base: base + NAME_MAX].rstrip(b"\0").decode())
                    (rank,) = struct.unpack_from("=I", body, base + NAME_MAX)
                    ranks.append(rank)
                    sl = struct.unpack_from("=12I", body, base + NAME_MAX + 8)
                    slices.append([tuple(sl[3 * k: 3 * k + 3]) for k in range(4)])
                off += nsrc * SOURCE_SIZE
                region_pages = []
                for _, npages in regions:
                    region_pages.append(list(struct.unpack_from(f"={npages}I", body, off)))
                    off += 4 * npages
                self.requests.append((type_, dict(room=room, pool_id=regions[0][0],
                                                  pages=region_pages[0], sources=srcs)))
                self.shapes.append(dict(room=room, ranks=ranks, slices=slices,
                                        regions=[(r[0], pg) for r, pg in
                                                 zip(regions, region_pages)]))
                st = self.status.get((type_, room), 0)
                self._reply(seq, st, 0 if st else self.gen)
            elif type_ == CHUNK:
                (room, idx, pool_id, npages, dst, last, region, buf_first, buf_count,
                 ndest) = struct.unpack_from("=QIiIIIIIII", body)
                pages = list(struct.unpack_from(f"={npages}I", body, CHUNK_FIXED))
                self.requests.append((type_, dict(room=room, chunk_index=idx, pool_id=pool_id,
                                                  pages=pages, dst_offset=dst, last=last)))
                self.shapes.append(dict(room=room, chunk_index=idx, region=region,
                                        buf_first=buf_first, buf_count=buf_count,
                                        ndest=ndest))
            elif type_ in (ROOM_CLOSE, ROOM_ABORT):
                (room,) = struct.unpack_from("=Q", body)
                self.requests.append((type_, dict(room=room)))
                st = self.status.get((type_, room), 0)
                self._reply(seq, st, 0 if st else self.gen + 1)
            elif type_ == ADMIN:
                cmd = body.decode()
                self.requests.append((type_, dict(cmd=cmd)))
                st, text = self.admin_replies.get(cmd, (0, "fake reply to " + cmd))
                self._reply(seq, st, 0, text.encode())
            elif type_ == ADMIN_AT:
                (offset,) = struct.unpack_from("=Q", body)
                cmd = body[8:].decode()
                if offset == 0:  # recorded as the command it is
                    self.requests.append((ADMIN, dict(cmd=cmd)))
                st, text = self.admin_replies.get(cmd, (0, "fake reply to " + cmd))
                text = text.encode()
                self._reply(seq, st, len(text), text[offset: offset + ADMIN_PAGE])
            else:
                self._reply(seq, -errno.EBADMSG)
