# SPDX-License-Identifier: Apache-2.0
"""The SGLang-shaped connector against the fake kvxd: chunks as kvx submissions, poll() states,
a receiver that is Failed only after RELEASED, failures with errno and reason, poll() never
blocking, ranks other than 0 refused."""
import errno
import threading
import time

import pytest

import kvx
from fakekvxd import CHUNK, ROOM_ABORT, ROOM_CLOSE, ROOM_OPEN
from kvx.connectors.sglang import (KVArgs, KVManager, KVPoll, KVReceiver, KVSender,
                                   KVTransferError)

S = kvx.State


@pytest.fixture
def mgr(fake):
    m = KVManager(KVArgs(fake.path, page_size=256, npages=32, nbufs=2), "decode")
    yield m
    m.close()


def test_poll_never_blocks(mgr):
    r = KVReceiver(mgr, "prefill", 5)
    r.init([1, 2, 3])
    t0 = time.monotonic()
    for _ in range(200):
        assert r.poll() == KVPoll.WaitingForInput
        assert time.monotonic() - t0 < 1.0, "poll() waits"


def test_receiver_maps_to_a_room(mgr, fake):
    r = KVReceiver(mgr, "prefill", 5)
    assert r.poll() == KVPoll.Bootstrapping
    r.init([4, 5, 6])
    assert fake.requests[-1] == (ROOM_OPEN, dict(room=5, pool_id=mgr.pool.id, pages=[4, 5, 6],
                                                 sources=["prefill"]))
    assert r.generation == fake.gen
    fake.push_event(5, 1, S.TRANSFERRING)
    fake.push_event(5, 1, S.SUCCESS)
    assert wait_for(r, KVPoll.Success)
    assert fake.requests[-1] == (ROOM_CLOSE, dict(room=5))
    assert mgr.rooms_in_flight() == 0


def wait_for(r, want, seconds=3):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if r.poll() == want:
            return True
        time.sleep(0.01)
    return False


def test_receiver_failed_only_after_released(mgr, fake):
    r = KVReceiver(mgr, "prefill", 7)
    r.init([0, 1])
    fake.push_event(7, 9, S.FAILED, -errno.ECONNRESET, "source prefill lost")
    fake.push_event(7, 9, S.DRAINING)
    time.sleep(0.2)  # both events are there to read
    for _ in range(20):
        assert r.poll() == KVPoll.Transferring, "pages handed back before RELEASED"
    assert fake.count(ROOM_CLOSE) == 0
    fake.push_event(7, 9, S.RELEASED)
    assert wait_for(r, KVPoll.Failed)
    with pytest.raises(KVTransferError) as ei:
        r.failure_exception()
    assert ei.value.errno == errno.ECONNRESET and ei.value.reason == "source prefill lost"
    assert ei.value.room == 7 and "source prefill lost" in str(ei.value)
    assert fake.requests[-1] == (ROOM_CLOSE, dict(room=7))


def test_receiver_abort_waits_for_released(mgr, fake):
    r = KVReceiver(mgr, "prefill", 8)
    r.init([3])
    r.abort()
    assert fake.requests[-1] == (ROOM_ABORT, dict(room=8))
    assert r.abort_generation == fake.gen + 1
    assert r.poll() == KVPoll.Transferring
    fake.push_event(8, fake.gen + 1, S.FAILED, -errno.ECANCELED, "aborted by the engine")
    time.sleep(0.1)
    assert r.poll() == KVPoll.Transferring
    fake.push_event(8, fake.gen + 1, S.RELEASED)
    assert wait_for(r, KVPoll.Failed)
    with pytest.raises(KVTransferError) as ei:
        r.failure_exception()
    assert ei.value.errno == errno.ECANCELED


def test_receiver_abort_lost_to_success(mgr, fake):
    r = KVReceiver(mgr, "prefill", 9)
    r.init([3])
    fake.status[(ROOM_ABORT, 9)] = -errno.EALREADY
    r.abort()
    fake.push_event(9, 1, S.SUCCESS)
    assert wait_for(r, KVPoll.Success)


def test_receiver_open_refused(mgr, fake):
    fake.status[(ROOM_OPEN, 4)] = -errno.EDQUOT
    r = KVReceiver(mgr, "prefill", 4)
    r.init([1])
    assert r.poll() == KVPoll.Failed
    with pytest.raises(KVTransferError) as ei:
        r.failure_exception()
    assert ei.value.errno == errno.EDQUOT
    assert mgr.rooms_in_flight() == 0


def test_sender_chunks(fake):
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        s = KVSender(m, "decode", 3, [0], 0)
        assert s.poll() == KVPoll.Bootstrapping
        s.init(6)
        assert s.poll() == KVPoll.WaitingForInput
        s.send([10, 11])
        s.send([12, 13, 14], index_slice=slice(2, 5))
        s.send([20])
        assert s.poll() == KVPoll.Transferring
        m.conn.close_room(99)  # a round trip: the chunks arrived before it
        chunks = [r for t, r in fake.requests if t == CHUNK]
        assert [(c["chunk_index"], c["pages"], c["dst_offset"], c["last"]) for c in chunks] == [
            (0, [10, 11], 0, 0), (1, [12, 13, 14], 2, 0), (2, [20], 5, 1)]
        assert all(c["room"] == 3 and c["pool_id"] == m.pool.id for c in chunks)
        with pytest.raises(ValueError):
            s.send([1, 2])  # past num_kv_indices
        fake.push_event(3, 0, S.SUCCESS)
        assert wait_for(s, KVPoll.Success)


def test_sender_last_after_every_page_in_any_order(fake):
    """Slices out of order: the slice that reaches num_kv_indices is not the last while pages
    before it are missing (kvxd would fail the room at the next chunk); the chunk that
    completes the room is, even when it overlaps pages already sent; nothing goes after it."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        s = KVSender(m, "decode", 4, [0], 0)
        s.init(6)
        s.send([14, 15], index_slice=slice(4, 6))  # the end first
        s.send([10, 11, 12], index_slice=slice(0, 3))
        s.send([12, 13], index_slice=slice(2, 4))  # page 2 again, page 3 completes
        with pytest.raises(ValueError):
            s.send([10], index_slice=slice(0, 1))  # the room's last chunk went
        m.conn.close_room(99)  # a round trip: the chunks arrived before it
        chunks = [r for t, r in fake.requests if t == CHUNK]
        assert [(c["chunk_index"], c["dst_offset"], c["last"]) for c in chunks] == [
            (0, 4, 0), (1, 0, 0), (2, 2, 1)]


def test_sender_failure_carries_reason(fake):
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        s = KVSender(m, "decode", 3)
        s.init(1)
        s.send([0])
        fake.push_event(3, 0, S.FAILED, -errno.EIO, "WR error: remote access error")
        assert wait_for(s, KVPoll.Failed)
        with pytest.raises(KVTransferError) as ei:
            s.failure_exception()
        assert ei.value.errno == errno.EIO and "remote access" in ei.value.reason
        n = fake.count(CHUNK)
        s.send([1])  # a failed room sends nothing more
        assert fake.count(CHUNK) == n


def wait_drained(m, until, seconds=3):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        m.drain()
        if until():
            return True
        time.sleep(0.01)
    return False


def test_sender_failed_submission_closes_what_kvxd_holds(fake, monkeypatch):
    """A submission that fails part-way with kvxd still there (libkvx: -ETIMEDOUT; the chunks
    before the one that failed may have gone, none after it, so the room's last did not): the
    sender is Failed and sends nothing more, and the id is closed, again while kvxd answers
    EBUSY (its room lives until decode's end fails it).  It was dropped unclosed: kvxd kept the
    room (max_rooms_per_engine)."""
    monkeypatch.setattr(KVManager, "_CLOSE_AGAIN_S", 0.01)
    with KVManager(KVArgs(fake.path, 256, 32, 2, aux_item_len=64, aux_count=4), "prefill") as m:
        real = m.conn.submit_many

        def part_way(chunks):
            real(chunks[:-1])  # the data chunk goes, the aux chunk (the room's last) does not
            raise kvx.Error(errno.ETIMEDOUT, "Connection timed out")

        s = KVSender(m, "decode", 5)
        s.init(4, aux_index=0)
        s.send([0, 1])
        fake.status[(ROOM_CLOSE, 5)] = -errno.EBUSY  # kvxd's room of it still lives
        monkeypatch.setattr(m.conn, "submit_many", part_way)
        s.send([2, 3])
        monkeypatch.setattr(m.conn, "submit_many", real)
        assert s.poll() == KVPoll.Failed
        with pytest.raises(KVTransferError) as ei:
            s.failure_exception()
        assert ei.value.errno == errno.ETIMEDOUT
        n = fake.count(CHUNK)
        s.send([0])  # a failed room sends nothing more
        assert m.rooms_in_flight() == 0
        closes = lambda: [r["room"] for t, r in fake.requests if t == ROOM_CLOSE]
        m.conn.close_room(99)  # a round trip: whatever was sent arrived before it
        assert fake.count(CHUNK) == n and closes() == [5, 99]
        del fake.status[(ROOM_CLOSE, 5)]  # kvxd's room ended: the close is taken
        assert wait_drained(m, lambda: closes().count(5) >= 2 and not m._close_again)
        fake.push_event(5, 0, S.FAILED, -errno.ECONNRESET, "decode failed it")
        assert wait_drained(m, lambda: m.unclaimed_events)  # nobody holds the room
        assert s.poll() == KVPoll.Failed


def ended_meanwhile(fake, m, call, state, room_of):
    """call, then kvxd hands its room `state` and "another thread" drains it before the call
    returns."""
    def wrapped(*args):
        r = call(*args)
        room = room_of(*args)
        fake.push_event(room, r if isinstance(r, int) else 0, state)
        assert wait_drained(m, lambda: m.rooms_in_flight() == 0)
        return r
    return wrapped


def test_state_of_a_call_never_overwrites_the_end(fake, monkeypatch):
    """Another thread's drain can hand a room its end while the room's own call waits for kvxd
    (its events come meanwhile): a sender's last chunk that succeeds at once, a receiver whose
    room ends before its open returns, an abort whose RELEASED comes first.  The call's state
    (Transferring, WaitingForInput) must not overwrite that end: the room is gone from the
    manager, and no event would fix it again."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        monkeypatch.setattr(m.conn, "submit_many", ended_meanwhile(
            fake, m, m.conn.submit_many, S.SUCCESS, lambda chunks: chunks[0].room))
        s = KVSender(m, "decode", 3)
        s.init(1)
        s.send([0])
        assert s.poll() == KVPoll.Success
    with KVManager(KVArgs(fake.path, 256, 32, 2), "decode") as m:
        real_open = m.conn.open_room_regions
        monkeypatch.setattr(m.conn, "open_room_regions", ended_meanwhile(
            fake, m, real_open, S.SUCCESS, lambda room, *_: room))
        r = KVReceiver(m, "prefill", 4)
        r.init([0, 1])
        assert r.poll() == KVPoll.Success
        monkeypatch.setattr(m.conn, "open_room_regions", real_open)
        monkeypatch.setattr(m.conn, "abort", ended_meanwhile(
            fake, m, m.conn.abort, S.RELEASED, lambda room: room))
        r = KVReceiver(m, "prefill", 6)
        r.init([2, 3])
        r.abort()
        assert r.poll() == KVPoll.Failed


def test_sender_close_that_times_out_is_tried_again(fake, monkeypatch):
    """The failed submission's close times out too (kvxd slow, not gone): the id is closed
    again at a later drain (it was let go for good, the room left at kvxd)."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        s = KVSender(m, "decode", 8)
        s.init(4)
        s.send([0, 1])
        real_submit, real_close = m.conn.submit_many, m.conn.close_room

        def times_out(*_):
            raise kvx.Error(errno.ETIMEDOUT, "Connection timed out")
        monkeypatch.setattr(m.conn, "submit_many", times_out)
        monkeypatch.setattr(m.conn, "close_room", times_out)
        s.send([2, 3])
        monkeypatch.setattr(m.conn, "submit_many", real_submit)
        monkeypatch.setattr(m.conn, "close_room", real_close)
        assert s.poll() == KVPoll.Failed and m.rooms_in_flight() == 0
        assert wait_drained(m, lambda: [r["room"] for t, r in fake.requests
                                        if t == ROOM_CLOSE] == [8] and not m._close_again)


def test_sender_chunks_after_the_end_are_closed(fake, monkeypatch):
    """A drain hands the room FAILED (and closes its id) while a submission of it is on its
    way: those chunks may open the room again at kvxd, so the id is closed once more."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        s = KVSender(m, "decode", 9)
        s.init(4)
        s.send([0, 1])
        real = m.conn.submit_many

        def failed_meanwhile(chunks):
            fake.push_event(9, 0, S.FAILED, -errno.EIO, "WR error")
            assert wait_drained(m, lambda: m.rooms_in_flight() == 0)
            return real(chunks)
        monkeypatch.setattr(m.conn, "submit_many", failed_meanwhile)
        s.send([2, 3])
        assert s.poll() == KVPoll.Failed
        closes = lambda: [r["room"] for t, r in fake.requests if t == ROOM_CLOSE]
        assert wait_drained(m, lambda: closes() == [9, 9] and not m._close_again)
        assert fake.count(CHUNK) == 2


def test_receiver_open_that_times_out_may_be_open(fake, monkeypatch):
    """An open that times out may have opened the room all the same (kvx.h): its pages are not
    the engine's until kvxd says RELEASED.  The receiver aborts it and says Failed only at
    RELEASED; when kvxd does not know the room (ENOENT), it was not opened: Failed at once."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "decode") as m:
        real = m.conn.open_room_regions

        def opened_then_timed_out(room, regions, sources):
            real(room, regions, sources)
            raise kvx.Error(errno.ETIMEDOUT, "Connection timed out")
        monkeypatch.setattr(m.conn, "open_room_regions", opened_then_timed_out)
        r = KVReceiver(m, "prefill", 11)
        r.init([0, 1])
        assert r.poll() == KVPoll.Transferring and r.abort_generation is not None
        assert [q["room"] for t, q in fake.requests if t == ROOM_ABORT] == [11]
        fake.push_event(11, r.abort_generation, S.FAILED, -errno.ECANCELED, "aborted")
        fake.push_event(11, r.abort_generation, S.DRAINING)
        assert not wait_for(r, KVPoll.Failed, 0.2)  # a source may still write
        fake.push_event(11, r.abort_generation, S.RELEASED)
        assert wait_for(r, KVPoll.Failed)
        assert r._errno == errno.ETIMEDOUT

        def timed_out(*_):
            raise kvx.Error(errno.ETIMEDOUT, "Connection timed out")
        monkeypatch.setattr(m.conn, "open_room_regions", timed_out)
        fake.status[(ROOM_ABORT, 12)] = -errno.ENOENT
        r = KVReceiver(m, "prefill", 12)
        r.init([2, 3])
        assert r.poll() == KVPoll.Failed and m.rooms_in_flight() == 0

        # kvxd answers neither the open nor the abort: the pages stay kvxd's (a source may
        # write) until the engine's own abort() learns that kvxd does not know the room
        real_abort = m.conn.abort
        monkeypatch.setattr(m.conn, "abort", timed_out)
        fake.status[(ROOM_ABORT, 13)] = -errno.ENOENT
        r = KVReceiver(m, "prefill", 13)
        r.init([4, 5])
        assert r.poll() == KVPoll.Transferring and m.rooms_in_flight() == 1
        monkeypatch.setattr(m.conn, "abort", real_abort)
        r.abort()
        assert r.poll() == KVPoll.Failed and m.rooms_in_flight() == 0
        assert r._errno == errno.ETIMEDOUT


def test_sender_submission_after_kvxd_left_holds_nothing(fake):
    """kvxd went away: the session's rooms went with it, the manager lets the room go at once."""
    m = KVManager(KVArgs(fake.path, 256, 32, 2), "prefill")
    try:
        s = KVSender(m, "decode", 7)
        s.init(4)
        s.send([0, 1])
        fake.hang_up()
        with pytest.raises(kvx.Error):  # libkvx sees it (and keeps it: every call fails)
            m.conn.read_events(8, 2000)
        s.send([2])
        assert s.poll() == KVPoll.Failed and s._errno == errno.ECONNRESET
        assert m.rooms_in_flight() == 0
    finally:
        try:
            m.close()
        except kvx.Error:
            pass  # its pool cannot be unregistered either


def test_close_refused_busy_leaves_the_drain_going(fake):
    """A room that ended is closed by the drain; a close answered EBUSY (kvxd holds another
    attempt's room under the id) ends ours all the same and the drain goes on to the next
    room's event (it raised, and poll() with it)."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        a, b = KVSender(m, "decode", 3), KVSender(m, "decode", 4)
        for s in (a, b):
            s.init(1)
            s.send([0])
        fake.status[(ROOM_CLOSE, 3)] = -errno.EBUSY
        fake.push_event(3, 0, S.FAILED, -errno.EIO, "peer lost")
        fake.push_event(4, 0, S.SUCCESS)
        assert wait_for(b, KVPoll.Success)
        assert a.poll() == KVPoll.Failed
        assert m.rooms_in_flight() == 0
        assert [r["room"] for t, r in fake.requests if t == ROOM_CLOSE] == [3, 4]


def test_close_timed_out_leaves_the_drain_going(fake, monkeypatch):
    """A room's close that times out in the drain (kvxd slow) does not stop the drain: the next
    room's event is handed out, and the id is closed again later (it raised out of poll(), the
    close and the rest of the batch lost)."""
    monkeypatch.setattr(KVManager, "_CLOSE_AGAIN_S", 0.01)
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        a, b = KVSender(m, "decode", 3), KVSender(m, "decode", 4)
        for s in (a, b):
            s.init(1)
            s.send([0])
        real = m.conn.close_room
        tried = []

        def slow_once(room):
            tried.append(room)
            if len(tried) == 1:
                raise kvx.Error(errno.ETIMEDOUT, "Connection timed out")
            return real(room)
        monkeypatch.setattr(m.conn, "close_room", slow_once)
        fake.push_event(3, 0, S.SUCCESS)
        fake.push_event(4, 0, S.SUCCESS)
        assert wait_for(b, KVPoll.Success) and a.poll() == KVPoll.Success
        assert wait_drained(m, lambda: [r["room"] for t, r in fake.requests
                                        if t == ROOM_CLOSE] == [4, 3] and not m._close_again)


def test_close_refused_busy_tried_again(fake, monkeypatch):
    """kvx.h: an attempt a refused chunk failed ends only with a close that is not answered
    EBUSY.  Such an id is closed again from the drain until that close is taken, and before a
    new room of the id is registered; then no more."""
    def closes(room):
        return sum(1 for t, r in fake.requests if t == ROOM_CLOSE and r["room"] == room)

    monkeypatch.setattr(KVManager, "_CLOSE_AGAIN_S", 0.5)  # far from a slow step's time
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        a, b = KVSender(m, "decode", 3), KVSender(m, "decode", 4)
        for s in (a, b):
            s.init(1)
            s.send([0])
        fake.status[(ROOM_CLOSE, 3)] = -errno.EBUSY
        fake.push_event(3, 0, S.FAILED, -errno.EBUSY, "room 3 drains: close the id first")
        assert wait_for(a, KVPoll.Failed)
        assert closes(3) == 1
        time.sleep(1.2 * KVManager._CLOSE_AGAIN_S)
        b.poll()  # b is in flight: its poll drains, and 3 is closed again
        assert closes(3) == 2
        del fake.status[(ROOM_CLOSE, 3)]
        time.sleep(1.2 * KVManager._CLOSE_AGAIN_S)
        b.poll()
        assert closes(3) == 3  # taken
        time.sleep(1.2 * KVManager._CLOSE_AGAIN_S)
        b.poll()
        assert closes(3) == 3  # and not again
        fake.status[(ROOM_CLOSE, 5)] = -errno.EBUSY
        c = KVSender(m, "decode", 5)
        c.init(1)
        c.send([0])
        fake.push_event(5, 0, S.FAILED, -errno.EBUSY, "room 5 drains: close the id first")
        assert wait_for(c, KVPoll.Failed)
        del fake.status[(ROOM_CLOSE, 5)]
        n = fake.count(CHUNK)
        KVSender(m, "decode", 5).init(1)  # a new attempt of 5 closes it first
        assert closes(5) == 2 and fake.count(CHUNK) == n
        time.sleep(1.2 * KVManager._CLOSE_AGAIN_S)
        b.poll()
        assert closes(5) == 2


def test_close_again_never_lands_on_a_new_room(fake, monkeypatch):
    """A close of an id whose earlier close was answered EBUSY and a new room of that id are
    never interleaved: the new room is registered only once that close is done (else the close
    could land after the new room's chunks and remove it)."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        m._close_again[9] = 0.0  # as if a close of 9 had been answered EBUSY, due now
        in_close, go_on = threading.Event(), threading.Event()
        real_close = m.conn.close_room
        seen = []

        def slow_close(room):  # the drain's close of 9 is one slow round trip; others are not
            if not in_close.is_set():
                in_close.set()
                go_on.wait(5)
                seen.append(room in m._rooms)  # was a room of 9 registered meanwhile?
            return real_close(room)

        monkeypatch.setattr(m.conn, "close_room", slow_close)
        drainer = threading.Thread(target=m._close_again_due)
        made = []
        maker = threading.Thread(target=lambda: made.append(KVSender(m, "decode", 9)))
        try:
            drainer.start()
            assert in_close.wait(5)
            maker.start()
            end = time.monotonic() + 1.0
            while not made and time.monotonic() < end:  # give it every chance to get in
                time.sleep(0.01)
        finally:
            go_on.set()
            drainer.join(5)
            maker.join(5)
        assert seen == [False]  # it waited for the close
        assert made and m.rooms_in_flight() == 1 and 9 not in m._close_again


def test_poll_does_not_wait_for_a_registration(fake):
    """poll() never blocks: while another thread registers a room (holding the close lock
    across a round trip to kvxd), a drain leaves a due close for the next drain."""
    with KVManager(KVArgs(fake.path, 256, 32, 2), "prefill") as m:
        m._close_again[9] = 0.0  # due now
        with m._close_lock:  # a registration in another thread, mid round trip
            t = threading.Thread(target=m.drain)
            t.start()
            t.join(2)
            stuck = t.is_alive()
        t.join(5)
        assert not stuck
        assert fake.count(ROOM_CLOSE) == 0 and 9 in m._close_again
        m.drain()
        assert fake.count(ROOM_CLOSE) == 1 and 9 not in m._close_again


def test_unsupported_ranks_and_bad_tp(fake):
    with KVManager(KVArgs(fake.path, 256, 4, 1), "prefill") as m:
        with pytest.raises(NotImplementedError):
            KVSender(m, "decode", 1, pp_rank=1)
        with pytest.raises(NotImplementedError):
            KVReceiver(m, "p", 1, prefill_dp_rank=1)
        with pytest.raises(ValueError):
            KVSender(m, "decode", 1, dest_tp_ranks=list(range(9)))  # more than MAX_DESTS
        s = KVSender(m, "decode", 2)
        with pytest.raises(ValueError):
            s.init(1, aux_index=0)  # no aux pool
    with pytest.raises(ValueError):
        KVArgs(fake.path, 256, 4, 1, tp_size=4, peer_tp_size=3)  # neither divides the other
    with pytest.raises(ValueError):
        KVArgs(fake.path, 256, 4, 1, engine_rank=2, tp_size=2)
    with pytest.raises(ValueError):
        KVManager(KVArgs(fake.path, 256, 4, 1), "decode", rank=2)  # not KVArgs.engine_rank


def test_decode_sources_follow_the_tp_sizes(fake):
    """Heads split evenly: each decode rank names the prefill ranks that hold its heads, with
    the slice of the page each one writes."""
    cases = [
        # (decode tp rank, decode tp, prefill tp, page) -> [(rank, (src_off, dst_off, len))]
        ((0, 1, 1, 256), [(0, (0, 0, 0))]),
        ((1, 2, 2, 256), [(1, (0, 0, 0))]),
        ((0, 1, 2, 256), [(0, (0, 0, 128)), (1, (0, 128, 128))]),
        ((1, 2, 8, 256), [(4, (0, 0, 64)), (5, (0, 64, 64)), (6, (0, 128, 64)),
                          (7, (0, 192, 64))]),
        ((3, 4, 2, 128), [(1, (128, 0, 128))]),
        ((0, 4, 1, 64), [(0, (0, 0, 64))]),
    ]
    for (d, dn, pn, page), want in cases:
        with KVManager(KVArgs(fake.path, page, 4, 1, engine_rank=d, tp_size=dn,
                              peer_tp_size=pn), "decode") as m:
            assert fake.hello["rank"] == d
            r = KVReceiver(m, "prefill", 100 + d)
            r.init([0, 1])
            shape = fake.shapes[-1]
            got = [(rk, sl[0]) for rk, sl in zip(shape["ranks"], shape["slices"])]
            assert got == want, (d, dn, pn)
            assert fake.requests[-1][1]["sources"] == ["prefill"] * len(want)


def test_prefill_fan_out_aux_and_layers(fake):
    """Prefill TP 1 feeding decode TP 2: every chunk names ndest 2; layer by layer, the last
    layer of the last pages is the last chunk, and the aux item goes with it (region 1)."""
    args = KVArgs(fake.path, 256, 8, 3, tp_size=1, peer_tp_size=2, aux_item_len=64,
                  aux_count=4)
    with KVManager(args, "prefill") as m:
        s = KVSender(m, "decode", 9)
        assert s.ndest == 2
        s.init(4, aux_index=3)
        for b in range(3):
            s.send([5, 6], layers=(b, 1))
        with pytest.raises(ValueError):
            s.send([7, 0], layers=(2, 1))  # layer 0 of the next pages comes first
        for b in range(3):
            s.send([7, 0], layers=(b, 1))
        fake.wait_for(lambda: fake.count(CHUNK) == 7)
        chunks = [(r, sh) for (t, r), sh in zip(
            [q for q in fake.requests if q[0] == CHUNK],
            [x for x in fake.shapes if "chunk_index" in x])]
        got = [(r["dst_offset"], r["last"], sh["region"], sh["buf_first"], sh["buf_count"],
                sh["ndest"]) for r, sh in chunks]
        assert got == [(0, 0, 0, 0, 1, 2), (0, 0, 0, 1, 1, 2), (0, 0, 0, 2, 1, 2),
                       (2, 0, 0, 0, 1, 2), (2, 0, 0, 1, 1, 2), (2, 0, 0, 2, 1, 2),
                       (0, 1, 1, 0, 0, 2)]
        assert chunks[-1][0]["pages"] == [3] and chunks[-1][0]["pool_id"] == m.aux_pool.id
    # prefill TP 2 into decode TP 1: only rank 0 writes the aux item
    for rank, sends_aux in ((0, True), (1, False)):
        args = KVArgs(fake.path, 128, 8, 1, engine_rank=rank, tp_size=2, peer_tp_size=1,
                      aux_item_len=64, aux_count=4)
        with KVManager(args, "prefill") as m:
            assert m.prefill_sends_aux() is sends_aux and m.prefill_ndest() == 1


numpy = pytest.importorskip("numpy")


def test_numpy_indices_as_sglang_passes_them(fake):
    with KVManager(KVArgs(fake.path, 256, 32, 2), "decode") as m:
        r = KVReceiver(m, "prefill", 1)
        r.init(numpy.array([5, 3, 2**32 - 1], dtype=numpy.int64))
        assert fake.requests[-1][1]["pages"] == [5, 3, 2**32 - 1]
        s = KVSender(m, "decode", 2)
        s.init(4)
        s.send(numpy.array([1, 2], dtype=numpy.int32))
        s.send(numpy.arange(10, dtype=numpy.int32)[::5])  # strided: copied contiguous
        m.conn.close_room(99)
        assert [c["pages"] for t, c in fake.requests if t == CHUNK] == [[1, 2], [0, 5]]
        n = len(fake.requests)
        for bad, exc in ((numpy.array([-1]), ValueError), (numpy.array([2**32]), ValueError),
                         (numpy.array([1.0]), TypeError), (numpy.zeros((2, 2), int), TypeError)):
            with pytest.raises(exc):
                KVReceiver(m, "prefill", 3).init(bad)
        assert len(fake.requests) == n
