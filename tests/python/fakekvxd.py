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

HDR = struct.Struct("=HHIQ")  # struct kvx_eng_hdr
REPLY = struct.Struct("=HHIQiIq")  # struct kvx_eng_reply (without its text)
EVENT = struct.Struct("=HHIQQIii96s4x")  # struct kvx_eng_event: hdr + struct kvx_event
NAME_MAX = 64

HELLO, POOL_REG, POOL_UNREG, ROOM_OPEN, CHUNK, ROOM_CLOSE, ADMIN, ROOM_ABORT, RINGS = range(1, 10)
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
        try:
            self.sock, _ = self.srv.accept()
        except OSError:
            return
        self.connected.set()
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
                room, pool_id, npages, nsrc = struct.unpack_from("=QiII", body)
                off = 24
                srcs = [body[off + i * NAME_MAX: off + (i + 1) * NAME_MAX].rstrip(b"\0").decode()
                        for i in range(nsrc)]
                off += nsrc * NAME_MAX
                pages = list(struct.unpack_from(f"={npages}I", body, off))
                self.requests.append((type_, dict(room=room, pool_id=pool_id, pages=pages,
                                                  sources=srcs)))
                st = self.status.get((type_, room), 0)
                self._reply(seq, st, 0 if st else self.gen)
            elif type_ == CHUNK:
                room, idx, pool_id, npages, dst, last = struct.unpack_from("=QIiIII", body)
                pages = list(struct.unpack_from(f"={npages}I", body, 32))
                self.requests.append((type_, dict(room=room, chunk_index=idx, pool_id=pool_id,
                                                  pages=pages, dst_offset=dst, last=last)))
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
            else:
                self._reply(seq, -errno.EBADMSG)
