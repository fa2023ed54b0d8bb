# SPDX-License-Identifier: Apache-2.0
"""The SGLang-shaped connector on two kvxd: senders and receivers polled to Success, bytes
exact; then aborts with canaries: a receiver's pages are handed back (poll() == Failed) only
once nothing can write into them any more."""
import time

import pytest

import kvx
from conftest import DECODE_SOCK, PREFILL_SOCK, pattern
from kvx.connectors.sglang import KVArgs, KVManager, KVPoll, KVReceiver, KVSender


def managers(page, npages_prefill, npages_decode, bufs):
    p = KVManager(KVArgs(PREFILL_SOCK, page, npages_prefill, bufs), "prefill")
    d = KVManager(KVArgs(DECODE_SOCK, page, npages_decode, bufs), "decode")
    return p, d


def poll_all(objs, seconds, on_change=None):
    """Poll every sender/receiver until each is Success or Failed (never blocking: poll()
    takes no time, we sleep between rounds).  Returns {obj: final state}."""
    state = {o: None for o in objs}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done = True
        for o in objs:
            s = o.poll()
            if s != state[o]:
                state[o] = s
                if on_change:
                    on_change(o, s)
            done &= s in (KVPoll.Success, KVPoll.Failed)
        if done:
            return state
        time.sleep(0.002)
    raise AssertionError(f"rooms still in flight after {seconds} s: "
                         f"{[(o.room, s) for o, s in state.items() if s not in (0, 4)]}")


def fill(pool, room, src, page, bufs):
    for b in range(bufs):
        for i, p in enumerate(src):
            pool.page(b, p)[:] = pattern(room * 7919 + i * 3 + b, page)


def exact(pool, room, dst, page, bufs):
    return all(bytes(pool.page(b, p)) == pattern(room * 7919 + i * 3 + b, page)
               for b in range(bufs) for i, p in enumerate(dst))


def test_sender_receiver_success():
    page, bufs, n, rooms = 4096, 2, 12, 6
    pm, dm = managers(page, n * rooms, n * rooms, bufs)
    with pm, dm:
        objs = []
        for k in range(rooms):
            room = 3000 + k
            dst = list(range(k * n, (k + 1) * n))[::-1]  # reversed: scattered per page
            src = list(range(k * n, (k + 1) * n))
            fill(pm.pool, room, src, page, bufs)
            r = KVReceiver(dm, "prefill", room)
            assert r.poll() == KVPoll.Bootstrapping
            r.init(dst)
            s = KVSender(pm, "decode", room, [0], 0)
            s.init(n)
            assert s.poll() == KVPoll.WaitingForInput
            for c in range(3):  # three chunks of 4 pages, the last one last
                s.send(src[c * 4:(c + 1) * 4], slice(c * 4, (c + 1) * 4))
            objs += [(r, dst), (s, None)]
        final = poll_all([o for o, _ in objs], 60)
        assert all(v == KVPoll.Success for v in final.values()), final
        for o, dst in objs:
            if dst is not None:
                assert exact(dm.pool, o.room, dst, page, bufs), f"room {o.room} differs"
        assert pm.rooms_in_flight() == 0 and dm.rooms_in_flight() == 0
        assert pm.unclaimed_events == [] and dm.unclaimed_events == []


def canary(room, b, i, page):
    return pattern(room * 7919 + i * 3 + b + (1 << 40), page)


def test_abort_canaries():
    """Half the rooms are aborted while their WRITEs are in flight (1 MiB rooms on ~30 MB/s
    Soft-RoCE).  The moment a receiver's poll() first says Failed, its pages are the engine's:
    we write a canary into them, as an engine reusing them would.  After every room ended and a
    settle period, not one canary byte may have changed."""
    page, bufs, n, rooms = 32 << 10, 2, 16, 12
    pm, dm = managers(page, n * 4, n * rooms, bufs)
    with pm, dm:
        recv, send, dst_of = [], [], {}
        for k in range(rooms):
            room = 4000 + k
            src = list(range((k % 4) * n, (k % 4 + 1) * n))
            dst = list(range(k * n, (k + 1) * n))
            if k < 4:  # rooms k and k + 4, k + 8 share source pages (and so their bytes)
                fill(pm.pool, room, src, page, bufs)
            r = KVReceiver(dm, "prefill", room)
            r.init(dst)
            s = KVSender(pm, "decode", room)
            s.init(n)
            for c in range(4):
                s.send(src[c * 4:(c + 1) * 4])
            recv.append(r)
            send.append(s)
            dst_of[room] = (dst, k % 4)
        aborted = set()
        for k in range(1, rooms, 2):  # every other room, a few ms into its transfer
            time.sleep(0.004)
            recv[k].abort()
            aborted.add(recv[k].room)

        armed = {}

        def on_change(o, s):
            if isinstance(o, KVReceiver) and s == KVPoll.Failed:
                dst, _ = dst_of[o.room]
                for b in range(bufs):
                    for i, p in enumerate(dst):
                        dm.pool.page(b, p)[:] = canary(o.room, b, i, page)
                armed[o.room] = time.monotonic()

        final = poll_all(recv + send, 120, on_change)
        # every room ended on both sides, and kvxd holds none of them any more
        t_end = time.monotonic() + 30
        while (pm.rooms_in_flight() or dm.rooms_in_flight()) and time.monotonic() < t_end:
            pm.drain()
            dm.drain()
            time.sleep(0.01)
        assert pm.rooms_in_flight() == 0 and dm.rooms_in_flight() == 0
        time.sleep(0.5)  # settle: anything still on the wire lands now
        changed = checked = 0
        for room in armed:
            dst, _ = dst_of[room]
            for b in range(bufs):
                for i, p in enumerate(dst):
                    got = bytes(dm.pool.page(b, p))
                    want = canary(room, b, i, page)
                    checked += len(want)
                    changed += sum(1 for x, y in zip(got, want) if x != y) if got != want else 0
        print(f"aborted={len(aborted)} released={len(armed)} canary_checked_bytes={checked} "
              f"canary_changed_bytes={changed}")
        assert changed == 0, f"{changed} canary bytes changed after the pages were handed back"
        assert armed, "no abort took effect: the canaries checked nothing"
        assert set(armed) <= aborted, "a room that was not aborted failed"
        for r in recv:
            if r.room in armed:
                with pytest.raises(Exception) as ei:
                    r.failure_exception()
                assert ei.value.errno and ei.value.room == r.room
            else:  # not aborted, or the abort lost the race to the last delivery
                assert final[r] == KVPoll.Success
                dst, k4 = dst_of[r.room]
                assert exact(dm.pool, 4000 + k4, dst, page, bufs), f"room {r.room} differs"


def tp_managers(prefill_tp, decode_tp, page_all_heads, npages, bufs, aux=64):
    """One KVManager per TP rank on each side; each rank's page holds its share of the heads."""
    pms = [KVManager(KVArgs(PREFILL_SOCK, page_all_heads // prefill_tp, npages, bufs,
                            engine_rank=k, tp_size=prefill_tp, peer_tp_size=decode_tp,
                            aux_item_len=aux, aux_count=npages), "prefill")
           for k in range(prefill_tp)]
    dms = [KVManager(KVArgs(DECODE_SOCK, page_all_heads // decode_tp, npages, bufs,
                            engine_rank=k, tp_size=decode_tp, peer_tp_size=prefill_tp,
                            aux_item_len=aux, aux_count=npages), "decode")
           for k in range(decode_tp)]
    return pms, dms


def heads(room, b, i, page_all_heads):
    """The bytes of all heads of room's page i in layer b (the model's 'truth')."""
    return pattern(room * 7919 + i * 3 + b, page_all_heads)


@pytest.mark.parametrize("prefill_tp,decode_tp", [(2, 1), (1, 2)])
def test_tp_ranks_head_slices_aux_layer_by_layer(prefill_tp, decode_tp):
    """Every TP rank of both engines uses the same bootstrap rooms: prefill TP 2 into decode
    TP 1 (two sources per room, head slices), and prefill TP 1 into decode TP 2 (one prefill
    room feeding two decode ranks).  Chunks go layer by layer (two page ranges x every layer),
    the aux item with the last one.  Each decode rank ends up with exactly its heads of every
    page of every layer, and the aux item."""
    page_all, bufs, n, rooms = 4096, 3, 4, 4
    pms, dms = tp_managers(prefill_tp, decode_tp, page_all, n * rooms, bufs)
    try:
        objs = []
        for k in range(rooms):
            room = 7000 + k
            src = list(range(k * n, (k + 1) * n))
            dst = list(range(k * n, (k + 1) * n))[::-1]
            for pr, pm in enumerate(pms):  # each prefill rank holds its heads
                w = page_all // prefill_tp
                for b in range(bufs):
                    for i, p in enumerate(src):
                        pm.pool.page(b, p)[:] = heads(room, b, i, page_all)[pr * w:(pr + 1) * w]
                pm.aux_pool.page(0, k)[:] = pattern(room + (1 << 41), 64)
            for dm in dms:
                r = KVReceiver(dm, "prefill", room)
                r.init(dst, aux_index=rooms + k)
                objs.append((r, dst))
            for pm in pms:
                s = KVSender(pm, "decode", room)
                s.init(n, aux_index=k)
                for half in range(2):  # two page ranges, each layer by layer
                    for b in range(bufs):
                        s.send(src[half * 2:half * 2 + 2], slice(half * 2, half * 2 + 2),
                               layers=(b, 1))
                objs.append((s, None))
        final = poll_all([o for o, _ in objs], 60)
        assert all(v == KVPoll.Success for v in final.values()), final
        bad = 0
        for o, dst in objs:
            if dst is None:
                continue
            dm, w = o.mgr, page_all // decode_tp
            d = dm.args.engine_rank
            for b in range(bufs):
                for i, p in enumerate(dst):
                    bad += bytes(dm.pool.page(b, p)) != heads(o.room, b, i, page_all)[
                        d * w:(d + 1) * w]
            bad += bytes(dm.aux_pool.page(0, rooms + o.room - 7000)) != \
                pattern(o.room + (1 << 41), 64)
        print(f"\nconnector prefill TP {prefill_tp} -> decode TP {decode_tp}: "
              f"{rooms} rooms, {len(objs)} senders and receivers, {bad} pages differ")
        assert bad == 0
    finally:
        for m in pms + dms:
            m.close()
