# SPDX-License-Identifier: Apache-2.0
"""One Conn, several threads: calls are serialised (no crossed replies, no crash), and a call
that waits releases the GIL (fake kvxd)."""
import errno
import threading
import time

import kvx
from fakekvxd import ROOM_CLOSE


def test_threads_share_a_conn(conn, fake):
    # odd rooms fail with ENOENT, even ones succeed: a reply handed to the wrong thread shows
    for r in range(1, 400, 2):
        fake.status[(ROOM_CLOSE, r)] = -errno.ENOENT
    errors = []

    def worker(base):
        try:
            for i in range(200):
                room = base * 1000 + i
                try:
                    conn.close_room(room)
                    assert room % 2 == 0 or room >= 400, f"room {room} closed"
                except kvx.Error as e:
                    assert e.errno == errno.ENOENT and room % 2 == 1 and room < 400, room
                conn.read_events(4, 0)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    # daemon: a thread stuck in libkvx (a bug) must not keep the interpreter alive
    ts = [threading.Thread(target=worker, args=(b,), daemon=True) for b in range(4)]
    # rooms 0..199 (base 0) carry the odd/even script; the others all succeed
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a thread is stuck"
    assert not errors, errors
    assert fake.count(ROOM_CLOSE) == 800


def test_wait_releases_the_gil(conn):
    # a thread that spins notes the longest time it could not run: with the GIL held through
    # the 500 ms wait, that would be the whole wait
    longest = 0.0
    stop = False

    def spin():
        nonlocal longest
        last = time.monotonic()
        while not stop:
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        t0 = time.monotonic()
        assert conn.read_events(4, 500) == []
        waited = time.monotonic() - t0
    finally:
        stop = True
        t.join()
    assert waited >= 0.45
    assert longest < 0.25, f"the other thread was held off for {longest:.3f} s during the wait"


def test_second_thread_waits_for_the_first(conn, fake):
    # thread A blocks in an event read (holding the connection); B's request waits for it,
    # then both complete and B's reply is B's
    got = []

    def reader():
        got.append(conn.read_events(4, 3000))

    a = threading.Thread(target=reader)
    a.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    fake.push_event(3, 1, kvx.State.SUCCESS)
    conn.close_room(2)
    a.join(5)
    assert got == [[kvx.Event(3, 1, kvx.State.SUCCESS, 0, "")]]
    assert time.monotonic() - t0 < 3
