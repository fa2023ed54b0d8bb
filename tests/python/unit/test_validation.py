# SPDX-License-Identifier: Apache-2.0
"""Arguments are checked before anything is sent: a refused call leaves no request at the
(fake) kvxd, and an accepted one arrives exactly as given."""
import array

import pytest

import kvx
from fakekvxd import CHUNK, ROOM_OPEN

try:
    import numpy
except ImportError:
    numpy = None


def refused(fake, exc, call, match=None):
    n = len(fake.requests)
    with pytest.raises(exc, match=match):
        call()
    assert len(fake.requests) == n, "a refused call reached kvxd"


@pytest.mark.parametrize("room,exc", [(2**63, ValueError), (-1, ValueError), (2**64, ValueError),
                                      ("1", TypeError), (True, TypeError), (1.0, TypeError)])
def test_room_id(conn, fake, room, exc):
    refused(fake, exc, lambda: conn.open_room(room, 1, [0], ["p"]), "room")
    refused(fake, exc, lambda: conn.submit(room, 0, 1, [0]), "room")
    refused(fake, exc, lambda: conn.abort(room), "room")
    refused(fake, exc, lambda: conn.close_room(room), "room")


def test_room_id_max_accepted(conn, fake):
    conn.open_room(2**63 - 1, 1, [0], ["p"])
    assert fake.requests[-1][1]["room"] == 2**63 - 1 == kvx.ROOM_ID_MAX


@pytest.mark.parametrize("pages,exc", [
    ([], ValueError), ([-1], ValueError), ([2**32], ValueError), (["0"], TypeError),
    ([0.0], TypeError), ([None], TypeError), (b"\0\0\0\0", TypeError), ("0", TypeError),
    (7, TypeError), (array.array("H", [1, 2]), TypeError), (array.array("Q", [1]), TypeError),
    (array.array("i", [1]), TypeError), (list(range(kvx.MAX_ROOM_PAGES + 1)), ValueError),
    (array.array("I"), ValueError)])
def test_pages_refused(conn, fake, pages, exc):
    refused(fake, exc, lambda: conn.open_room(1, 1, pages, ["p"]))
    refused(fake, exc, lambda: conn.submit(1, 0, 1, pages))


def test_pages_accepted_exactly(conn, fake):
    big = list(range(kvx.MAX_ROOM_PAGES))
    for pages in ([0, 2**32 - 1, 5], (3, 1), range(4), array.array("I", [9, 8, 7]), big):
        conn.open_room(1, 1, pages, ["p"])
        assert fake.requests[-1] == (ROOM_OPEN, dict(room=1, pool_id=1, pages=list(pages),
                                                     sources=["p"]))
        conn.submit(2, 3, 1, pages, dst_offset=0, last=True)
    conn.close_room(1)  # a round trip: every chunk before it has arrived
    chunks = [r for t, r in fake.requests if t == CHUNK]
    assert len(chunks) == 5 and chunks[0] == dict(room=2, chunk_index=3, pool_id=1,
                                                  pages=[0, 2**32 - 1, 5], dst_offset=0, last=1)
    assert chunks[-1]["pages"] == big


@pytest.mark.skipif(numpy is None, reason="numpy not installed")
def test_pages_numpy(conn, fake):
    conn.open_room(1, 1, numpy.array([4, 5, 6], dtype=numpy.uint32), ["p"])
    assert fake.requests[-1][1]["pages"] == [4, 5, 6]
    # a buffer of another type is refused, never converted behind the caller's back
    refused(fake, TypeError, lambda: conn.open_room(1, 1, numpy.array([4, 5], dtype=numpy.int64),
                                                    ["p"]))
    # numpy integers in a list are ints (__index__)
    conn.open_room(1, 1, [numpy.uint64(4), numpy.int32(5)], ["p"])
    assert fake.requests[-1][1]["pages"] == [4, 5]
    strided = numpy.arange(8, dtype=numpy.uint32)[::2]
    refused(fake, (TypeError, ValueError, BufferError), lambda: conn.open_room(1, 1, strided,
                                                                               ["p"]))


@pytest.mark.parametrize("sources,exc", [
    ("prefill", TypeError), ([], ValueError), ([b"prefill"], TypeError), (["a b"], ValueError),
    (["a/b"], ValueError), ([""], ValueError), (["x" * 64], ValueError), (["p", "p"], ValueError),
    ([f"s{i}" for i in range(kvx.MAX_SOURCES + 1)], ValueError), (["pré"], ValueError)])
def test_sources_refused(conn, fake, sources, exc):
    refused(fake, exc, lambda: conn.open_room(1, 1, [0], sources))


def test_sources_accepted(conn, fake):
    names = ["x" * 63] + [f"n-{i}.a_b" for i in range(kvx.MAX_SOURCES - 1)]
    conn.open_room(1, 1, [0], names)
    assert fake.requests[-1][1]["sources"] == names


@pytest.mark.parametrize("kw,exc", [
    (dict(chunk_index=2**32), ValueError), (dict(chunk_index=-1), ValueError),
    (dict(dst_offset=-1), ValueError), (dict(dst_offset=2**32), ValueError),
    (dict(dst_offset=kvx.MAX_ROOM_PAGES - 1, src_pages=[0, 1]), ValueError),
    (dict(dst_offset=2**32 - 1, src_pages=[0, 1]), ValueError),  # would wrap in 32 bits
    (dict(pool=0), ValueError), (dict(pool=2**31), ValueError), (dict(pool="1"), TypeError)])
def test_chunk_refused(conn, fake, kw, exc):
    args = dict(room=1, chunk_index=0, pool=1, src_pages=[0], dst_offset=0, last=False)
    args.update(kw)
    refused(fake, exc, lambda: conn.submit(**args))


def test_chunk_last_page_of_room_accepted(conn, fake):
    conn.submit(1, 2**32 - 1, 2**31 - 1, [7], dst_offset=kvx.MAX_ROOM_PAGES - 1, last=True)
    conn.close_room(1)
    assert fake.requests[-2] == (CHUNK, dict(room=1, chunk_index=2**32 - 1, pool_id=2**31 - 1,
                                             pages=[7], dst_offset=kvx.MAX_ROOM_PAGES - 1,
                                             last=1))


@pytest.mark.parametrize("args,exc", [((0, 0), ValueError), ((4097, 0), ValueError),
                                      ((1, -2), ValueError), ((1, 2**31), ValueError),
                                      (("1", 0), TypeError)])
def test_read_events_args(conn, args, exc):
    with pytest.raises(exc):
        conn._c.event_read(*args)


@pytest.mark.parametrize("cmd,exc", [("", ValueError), ("a\0b", ValueError), (b"rooms", TypeError)])
def test_admin_args(conn, fake, cmd, exc):
    refused(fake, exc, lambda: conn.admin(cmd))


def test_pool_register_args(conn, fake):
    m = kvx.PoolMemory(64, 1, 1)
    try:
        for geo, exc in (((100, 1, 1), ValueError), ((0, 1, 1), ValueError),
                         ((64, 0, 1), ValueError), ((64, 1, 2**32), ValueError),
                         ((32 << 20, 1, 1), ValueError)):
            refused(fake, exc, lambda: conn._c.pool_register(m.fileno(), *geo))
        refused(fake, ValueError, lambda: conn._c.pool_register(-1, 64, 1, 1))
    finally:
        m.close()
