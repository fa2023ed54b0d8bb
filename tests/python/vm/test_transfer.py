# SPDX-License-Identifier: Apache-2.0
"""Python prefill and Python decode move rooms through two kvxd, byte-exact: several rooms in
flight, several chunks each, scattered source and destination pages; events through
Conn.events() and through asyncio (Conn.fileno())."""
import asyncio
import errno
import random

import kvx
from conftest import DECODE_SOCK, PREFILL_SOCK, pattern

PAGE = 4096
BUFS = 2
ROOM_PAGES = 16
CHUNKS = 4


def fill_sources(pool, room, src):
    for b in range(BUFS):
        for i, p in enumerate(src):
            pool.page(b, p)[:] = pattern(room * 1_000_003 + i * 7 + b, PAGE)


def check_room(dpool, room, dst):
    bad = 0
    for b in range(BUFS):
        for i, p in enumerate(dst):
            if bytes(dpool.page(b, p)) != pattern(room * 1_000_003 + i * 7 + b, PAGE):
                bad += 1
    return bad


def submit_room(prefill, ppool, room, src):
    per = ROOM_PAGES // CHUNKS
    for c in range(CHUNKS):
        prefill.submit(room, c, ppool, src[c * per:(c + 1) * per], dst_offset=c * per,
                       last=c == CHUNKS - 1)


def test_rooms_byte_exact(prefill, decode):
    rng = random.Random(1)
    nrooms = 8
    assert prefill.node_name == "prefill" and decode.node_name == "decode"
    with prefill.pool(PAGE, ROOM_PAGES * nrooms, BUFS) as ppool, \
            decode.pool(PAGE, ROOM_PAGES * nrooms, BUFS) as dpool:
        dpool.buffer[:] = b"\xee" * dpool.nbytes
        dst_all = list(range(ROOM_PAGES * nrooms))
        src_all = list(range(ROOM_PAGES * nrooms))
        rng.shuffle(dst_all)
        rng.shuffle(src_all)
        rooms = {}
        for k in range(nrooms):
            room = 1000 + k
            dst = dst_all[k * ROOM_PAGES:(k + 1) * ROOM_PAGES]
            src = src_all[k * ROOM_PAGES:(k + 1) * ROOM_PAGES]
            fill_sources(ppool, room, src)
            gen = decode.open_room(room, dpool, dst, ["prefill"])
            assert 1 <= gen < 2**32
            submit_room(prefill, ppool, room, src)
            rooms[room] = dst
        ends = {"prefill": {}, "decode": {}}
        for side, conn in (("decode", decode), ("prefill", prefill)):
            for ev in conn.events(timeout=30):
                if ev.state in (kvx.State.SUCCESS, kvx.State.FAILED, kvx.State.RELEASED):
                    assert ev.room not in ends[side], f"{side}: room {ev.room} ended twice"
                    ends[side][ev.room] = ev
                if len(ends[side]) == nrooms:
                    break
        for side in ends:
            assert {r: e.state for r, e in ends[side].items()} == \
                {r: kvx.State.SUCCESS for r in rooms}, (side, ends[side])
        for room, dst in rooms.items():
            assert check_room(dpool, room, dst) == 0, f"room {room}: pages differ"
        # every room closes on each side in one batch call, and only once
        assert decode.close_rooms(list(rooms)) == [0] * nrooms
        assert prefill.close_rooms(list(rooms)) == [0] * nrooms
        assert decode.close_rooms(list(rooms)) == [-errno.ENOENT] * nrooms
        # nothing outside the rooms' pages was written: every page was some room's here


def test_events_through_asyncio(prefill, decode):
    """Conn.fileno() in an asyncio loop: the reader wakes for the room's SUCCESS."""
    room = 2000

    async def main(dpool, ppool):
        loop = asyncio.get_running_loop()
        got = asyncio.Queue()

        def readable():
            for ev in decode.read_events(16, 0):
                got.put_nowait(ev)

        loop.add_reader(decode.fileno(), readable)
        try:
            fill_sources(ppool, room, list(range(ROOM_PAGES)))
            decode.open_room(room, dpool, list(range(ROOM_PAGES)), ["prefill"])
            submit_room(prefill, ppool, room, list(range(ROOM_PAGES)))
            while True:
                ev = await asyncio.wait_for(got.get(), 30)
                if ev.room == room and ev.state == kvx.State.SUCCESS:
                    return
                assert ev.state not in (kvx.State.FAILED, kvx.State.RELEASED), ev
        finally:
            loop.remove_reader(decode.fileno())

    with prefill.pool(PAGE, ROOM_PAGES, BUFS) as ppool, \
            decode.pool(PAGE, ROOM_PAGES, BUFS) as dpool:
        asyncio.run(main(dpool, ppool))
        assert check_room(dpool, room, list(range(ROOM_PAGES))) == 0
        decode.close_room(room)
        for ev in prefill.events(timeout=30):
            if ev.room == room and ev.state == kvx.State.SUCCESS:
                break
        else:
            raise AssertionError("prefill never told SUCCESS")
        prefill.close_room(room)


def test_rooms_wake_ends():
    """wake_ends=True (KVX_CONNECT_WAKE_ENDS) on real kvxd: rooms still move byte-exact and every
    room's states are still read, in order: decode's WAITING_FOR_INPUT before its SUCCESS, one end
    per room and side, nothing after it.  (Which events wake the engine is checked in test_engine:
    test_core_ring_wake_ends, test_event_ring_wake_ends.)"""
    nrooms = 4
    with kvx.connect(PREFILL_SOCK, wake_ends=True) as prefill, \
            kvx.connect(DECODE_SOCK, wake_ends=True) as decode, \
            prefill.pool(PAGE, ROOM_PAGES * nrooms, BUFS) as ppool, \
            decode.pool(PAGE, ROOM_PAGES * nrooms, BUFS) as dpool:
        rooms = {}
        for k in range(nrooms):
            room = 2000 + k
            pages = list(range(k * ROOM_PAGES, (k + 1) * ROOM_PAGES))
            fill_sources(ppool, room, pages)
            decode.open_room(room, dpool, pages, ["prefill"])
            submit_room(prefill, ppool, room, pages)
            rooms[room] = pages
        seen = {"prefill": {}, "decode": {}}
        for side, conn in (("decode", decode), ("prefill", prefill)):
            ends = 0
            for ev in conn.events(timeout=30):
                states = seen[side].setdefault(ev.room, [])
                assert not states or states[-1] not in (
                    kvx.State.SUCCESS, kvx.State.FAILED, kvx.State.RELEASED), \
                    f"{side}: room {ev.room}: {ev.state} after its end {states}"
                states.append(ev.state)
                if ev.state in (kvx.State.SUCCESS, kvx.State.FAILED, kvx.State.RELEASED):
                    ends += 1
                if ends == nrooms:
                    break
        for side in seen:
            assert {r: s[-1] for r, s in seen[side].items()} == \
                {r: kvx.State.SUCCESS for r in rooms}, (side, seen[side])
        for room in rooms:
            assert kvx.State.WAITING_FOR_INPUT in seen["decode"][room], seen["decode"][room]
        for room, dst in rooms.items():
            assert check_room(dpool, room, dst) == 0, f"room {room}: pages differ"
        assert decode.close_rooms(list(rooms)) == [0] * nrooms
        assert prefill.close_rooms(list(rooms)) == [0] * nrooms
