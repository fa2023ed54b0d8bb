# SPDX-License-Identifier: Apache-2.0
"""The room shapes engines need (issue 10), on two real kvxd, byte-exact:

- TP ranks: every rank opens (decode) or submits to (prefill) the same room id;
- different TP on the two sides: head slices of every page (sub-page offsets and lengths);
- an auxiliary region with its own item size, next to the K/V pages;
- layer-wise chunks: one chunk per layer's buffer, submitted as the layer is done;
- fan-out: one prefill room feeding two decode endpoints (decode TP 2 from prefill TP 1);
- aborts of a share of fan-out rooms, with canaries: no byte changes after RELEASED;
- a fan-out room's parked rank that aborts before the first chunk fails the room at once."""
import contextlib
import random
import time

import kvx
from conftest import DECODE_SOCK, PREFILL_SOCK, pattern

PAGE = 4096  # the decode page of TP 1: all heads
HALF = PAGE // 2  # a TP 2 rank's page: half the heads
LAYERS = 4  # buffers: one per layer
AUX = 512  # auxiliary item size (first token, hidden state, ...)
END_DECODE = (kvx.State.SUCCESS, kvx.State.RELEASED)
END_PREFILL = (kvx.State.SUCCESS, kvx.State.FAILED)


def src_bytes(room, rank, layer, i, n):
    return pattern(room * 1_000_003 + rank * 10_007 + layer * 101 + i, n)


def wait_ends(pending, timeout=60.0, on_end=None):
    """pending: {(conn, room): terminal states}.  Reads every conn's events until each room
    ended; returns {(conn, room): [events]}.  on_end(conn, room, event) runs at the end."""
    seen = {k: [] for k in pending}
    left = set(pending)
    deadline = time.monotonic() + timeout
    conns = {c for c, _ in pending}
    while left and time.monotonic() < deadline:
        for c in conns:
            for ev in c.read_events(64, 10):
                key = (c, ev.room)
                if key not in seen:
                    continue
                seen[key].append(ev)
                if ev.state in pending[key] and key in left:
                    left.discard(key)
                    if on_end:
                        on_end(c, ev.room, ev)
    assert not left, f"rooms that never ended: {sorted(r for _, r in left)}"
    return seen


def ends_of(evs, states):
    return [e for e in evs if e.state in states]


def test_tp2_prefill_to_tp1_decode_head_slices_aux_layer_by_layer():
    """Prefill TP 2 (ranks 0 and 1, each half of the heads: pages of 2 KiB) into decode TP 1
    (pages of 4 KiB): rank k's page lands in bytes [k * 2 KiB, (k + 1) * 2 KiB) of the decode
    page, layer by layer; rank 0 also sends the auxiliary item of each room."""
    rng = random.Random(7)
    nrooms, kv_pages = 6, 4
    with kvx.connect(DECODE_SOCK, rank=0) as dec, \
            kvx.connect(PREFILL_SOCK, rank=0) as pf0, kvx.connect(PREFILL_SOCK, rank=1) as pf1:
        pfs = [pf0, pf1]
        assert (pf0.rank, pf1.rank, dec.rank) == (0, 1, 0)
        with dec.pool(PAGE, nrooms * kv_pages, LAYERS) as dkv, dec.pool(AUX, nrooms, 1) as daux, \
                pf0.pool(HALF, nrooms * kv_pages, LAYERS) as s0, \
                pf1.pool(HALF, nrooms * kv_pages, LAYERS) as s1, \
                pf0.pool(AUX, nrooms, 1) as saux:
            skv = [s0, s1]
            dkv.buffer[:] = b"\xee" * dkv.nbytes
            daux.buffer[:] = b"\xee" * daux.nbytes
            dst_all = list(range(nrooms * kv_pages))
            rng.shuffle(dst_all)
            aux_dst = list(range(nrooms))
            rng.shuffle(aux_dst)
            rooms = {}
            for n in range(nrooms):
                room = 5000 + n
                dst = dst_all[n * kv_pages:(n + 1) * kv_pages]
                src = list(range(n * kv_pages, (n + 1) * kv_pages))
                for k in range(2):
                    for b in range(LAYERS):
                        for i, p in enumerate(src):
                            skv[k].page(b, p)[:] = src_bytes(room, k, b, i, HALF)
                saux.page(0, n)[:] = src_bytes(room, 9, 0, 0, AUX)
                sources = [kvx.Source("prefill", k, [kvx.Slice(0, k * HALF, HALF)])
                           for k in range(2)]
                gen = dec.open_room_regions(
                    room, [kvx.Region(dkv, dst), kvx.Region(daux, [aux_dst[n]])], sources)
                assert 1 <= gen < 2**32
                rooms[room] = (dst, src, aux_dst[n])
            # layer by layer: each layer's chunk from both ranks as soon as it is "computed"
            for b in range(LAYERS):
                for room, (dst, src, _) in rooms.items():
                    for k in range(2):
                        pfs[k].submit(room, b, skv[k], src, 0, last=(k == 1 and b == LAYERS - 1),
                                      region=0, buf_first=b, buf_count=1)
            # rank 0's last chunk of each room: the auxiliary item (region 1), in a batch
            assert pf0.submit_many([kvx.Chunk(room, LAYERS, saux, [n], 0, True, region=1)
                                    for n, room in enumerate(rooms)]) == nrooms
            pending = {(dec, r): END_DECODE for r in rooms}
            pending.update({(pf, r): END_PREFILL for pf in pfs for r in rooms})
            seen = wait_ends(pending)
            for key, evs in seen.items():
                ends = ends_of(evs, pending[key])
                assert [e.state for e in ends] == [kvx.State.SUCCESS], (key[1], evs)
            bad = 0
            for room, (dst, src, adst) in rooms.items():
                for b in range(LAYERS):
                    for i, p in enumerate(dst):
                        page = bytes(dkv.page(b, p))
                        for k in range(2):
                            bad += page[k * HALF:(k + 1) * HALF] != src_bytes(room, k, b, i, HALF)
                bad += bytes(daux.page(0, adst)) != src_bytes(room, 9, 0, 0, AUX)
            untouched = set(range(nrooms)) - {a for _, _, a in rooms.values()}
            for p in untouched:
                bad += bytes(daux.page(0, p)) != b"\xee" * AUX
            print(f"\nshapes tp2->tp1: {nrooms} rooms x {LAYERS} layers x {kv_pages} pages, "
                  f"2 head slices + aux: {bad} slices differ")
            assert bad == 0
            for room in rooms:
                dec.close_room(room)
                for pf in pfs:
                    pf.close_room(room)


@contextlib.contextmanager
def fan_out_engines(npages):
    """Decode ranks 0 and 1 (pools of npages 2 KiB pages, filled with 0xee) and prefill rank 0
    (a pool of npages 4 KiB pages), LAYERS buffers each: ([d0, d1], pf, [pool0, pool1], spool)."""
    with kvx.connect(DECODE_SOCK, rank=0) as d0, kvx.connect(DECODE_SOCK, rank=1) as d1, \
            kvx.connect(PREFILL_SOCK, rank=0) as pf:
        with d0.pool(HALF, npages, LAYERS) as p0, d1.pool(HALF, npages, LAYERS) as p1, \
                pf.pool(PAGE, npages, LAYERS) as spool:
            for p in (p0, p1):
                p.buffer[:] = b"\xee" * p.nbytes
            yield [d0, d1], pf, [p0, p1], spool


def fan_out_rooms(nrooms, kv_pages, abort_share, seed):
    """Decode TP 2 (ranks 0 and 1, pages of 2 KiB) fed by one prefill room each of prefill TP 1
    (rank 0, pages of 4 KiB, ndest = 2): rank k takes bytes [k * 2 KiB, (k + 1) * 2 KiB) of every
    source page.  Decode rank 0 aborts a share of the rooms after their first layer went out;
    canaries go into a decode rank's pages the moment RELEASED hands them back."""
    rng = random.Random(seed)
    with fan_out_engines(nrooms * kv_pages) as (decs, pf, dpools, spool):
        d0 = decs[0]
        rooms = {}
        for n in range(nrooms):
            room = 6000 + seed * 100 + n
            src = list(range(n * kv_pages, (n + 1) * kv_pages))
            dst = [list(range(n * kv_pages, (n + 1) * kv_pages)) for _ in range(2)]
            for d in dst:
                rng.shuffle(d)
            for b in range(LAYERS):
                for i, p in enumerate(src):
                    spool.page(b, p)[:] = src_bytes(room, 0, b, i, PAGE)
            for k in range(2):
                decs[k].open_room_regions(room, [kvx.Region(dpools[k], dst[k])],
                                          [kvx.Source("prefill", 0,
                                                      [kvx.Slice(k * HALF, 0, HALF)])])
            rooms[room] = (src, dst)
        aborted = set(rng.sample(sorted(rooms), int(nrooms * abort_share)))
        canaries = {}  # (rank, room) -> pages written with the canary at RELEASED

        def on_end(conn, room, ev):
            if conn in decs and ev.state == kvx.State.RELEASED:
                k = decs.index(conn)
                for b in range(LAYERS):
                    for p in rooms[room][1][k]:
                        dpools[k].page(b, p)[:] = b"\xc5" * HALF
                canaries[(k, room)] = rooms[room][1][k]

        for b in range(LAYERS):
            pf.submit_many([kvx.Chunk(room, b, spool, src, 0, b == LAYERS - 1,
                                      buf_first=b, buf_count=1, ndest=2)
                            for room, (src, _) in rooms.items()])
            if b == 0:
                for room in aborted:
                    d0.abort(room)
        pending = {(d, r): END_DECODE for d in decs for r in rooms}
        pending.update({(pf, r): END_PREFILL for r in rooms})
        seen = wait_ends(pending, on_end=on_end)
        time.sleep(0.5)  # anything still in flight would land now
        result = dict(aborted=len(aborted), released=len(canaries), changed=0, bad=0)
        for (k, room), pages in canaries.items():
            for b in range(LAYERS):
                for p in pages:
                    result["changed"] += bytes(dpools[k].page(b, p)) != b"\xc5" * HALF
        for room, (src, dst) in rooms.items():
            dec_ends = [ends_of(seen[(decs[k], room)], END_DECODE) for k in range(2)]
            pf_end = ends_of(seen[(pf, room)], END_PREFILL)
            assert all(len(e) == 1 for e in dec_ends) and len(pf_end) == 1, room
            if room not in aborted:
                assert [e[0].state for e in dec_ends] == [kvx.State.SUCCESS] * 2, room
                assert pf_end[0].state == kvx.State.SUCCESS
            else:
                assert dec_ends[0][0].state == kvx.State.RELEASED, room
            for k in range(2):
                if dec_ends[k][0].state != kvx.State.SUCCESS:
                    continue
                for b in range(LAYERS):
                    for i, p in enumerate(dst[k]):
                        want = src_bytes(room, 0, b, i, PAGE)[k * HALF:(k + 1) * HALF]
                        result["bad"] += bytes(dpools[k].page(b, p)) != want
        for room in rooms:
            for c in decs + [pf]:
                c.close_room(room)
        return result


def test_fan_out_one_prefill_room_to_two_decode_ranks():
    r = fan_out_rooms(nrooms=6, kv_pages=4, abort_share=0, seed=1)
    print(f"\nfan-out tp1->tp2: {r}")
    assert r["bad"] == 0 and r["released"] == 0


def test_fan_out_aborts_with_canaries():
    r = fan_out_rooms(nrooms=12, kv_pages=16, abort_share=0.5, seed=2)
    print(f"\nfan-out aborts: {r}")
    assert r["aborted"] == 6 and r["released"] >= 6
    assert r["bad"] == 0, "a room that succeeded holds wrong bytes"
    assert r["changed"] == 0, "canary bytes changed after RELEASED"


def test_fan_out_parked_rank_aborts_before_the_first_chunk():
    """Decode rank 1 aborts while its ROOM_META waits (parked) at prefill for the engine's first
    chunk: rank 0's came first (one peer connection carries both, in order).  Its ABORT is
    acknowledged at once (RELEASED).  The engine's first chunk then says ndest = 2, which makes
    the aborted rank a destination: the room fails at once for rank 0 and at prefill, not at
    waiting_ms (20 s in the VM's configs), and nothing is written to either rank."""
    nrooms, kv_pages = 4, 4
    with fan_out_engines(nrooms * kv_pages) as (decs, pf, dpools, spool):
        d0, d1 = decs
        rooms = {6900 + n: list(range(n * kv_pages, (n + 1) * kv_pages))
                 for n in range(nrooms)}
        for k in range(2):
            for room, pages in rooms.items():
                decs[k].open_room_regions(room, [kvx.Region(dpools[k], pages)],
                                          [kvx.Source("prefill", 0,
                                                      [kvx.Slice(k * HALF, 0, HALF)])])
        for room in rooms:
            d1.abort(room)
        wait_ends({(d1, r): (kvx.State.RELEASED,) for r in rooms})
        t0 = time.monotonic()
        for b in range(LAYERS):
            pf.submit_many([kvx.Chunk(room, b, spool, pages, 0, b == LAYERS - 1,
                                      buf_first=b, buf_count=1, ndest=2)
                            for room, pages in rooms.items()])
        pending = {(d0, r): END_DECODE for r in rooms}
        pending.update({(pf, r): END_PREFILL for r in rooms})
        seen = wait_ends(pending)
        took = time.monotonic() - t0
        time.sleep(0.5)  # anything still in flight would land now
        for room in rooms:
            assert [e.state for e in ends_of(seen[(d0, room)], END_DECODE)] == \
                [kvx.State.RELEASED], room
            pf_end = ends_of(seen[(pf, room)], END_PREFILL)
            assert [e.state for e in pf_end] == [kvx.State.FAILED], room
            assert "while its ROOM_META waited" in pf_end[0].reason, pf_end[0].reason
        written = sum(bytes(p.buffer) != b"\xee" * p.nbytes for p in dpools)
        print(f"\nfan-out, parked rank aborted: {nrooms} rooms ended {took:.3f} s after "
              f"the first chunk (waiting_ms 20 s); pools written: {written}")
        assert written == 0
        for room in rooms:
            for c in decs + [pf]:
                c.close_room(room)
