# SPDX-License-Identifier: Apache-2.0
"""The SGLang-shaped connector against the fake kvxd: chunks as kvx submissions, poll() states,
a receiver that is Failed only after RELEASED, failures with errno and reason, poll() never
blocking, ranks other than 0 refused."""
import errno
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


def test_only_rank_0(fake):
    with pytest.raises(NotImplementedError):
        KVManager(KVArgs(fake.path, 256, 4, 1, engine_rank=1), "decode")
    with pytest.raises(NotImplementedError):
        KVManager(KVArgs(fake.path, 256, 4, 1), "decode", rank=2)
    with KVManager(KVArgs(fake.path, 256, 4, 1), "prefill") as m:
        with pytest.raises(NotImplementedError):
            KVSender(m, "decode", 1, dest_tp_ranks=[0, 1])
        with pytest.raises(NotImplementedError):
            KVSender(m, "decode", 1, pp_rank=1)
        with pytest.raises(NotImplementedError):
            KVReceiver(m, "p", 1, prefill_dp_rank=1)
        s = KVSender(m, "decode", 2)
        with pytest.raises(NotImplementedError):
            s.init(1, aux_index=0)


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
