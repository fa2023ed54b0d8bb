# SPDX-License-Identifier: Apache-2.0
"""kvx.Error and errno mapping, events, a closed connection, kvxd going away (fake kvxd)."""
import errno
import os

import pytest

import kvx
from fakekvxd import ROOM_ABORT, ROOM_CLOSE


def test_error_is_an_oserror():
    assert issubclass(kvx.Error, OSError)


def test_connect_missing_socket_is_enoent(tmp_path):
    with pytest.raises(kvx.Error) as ei:
        kvx.connect(tmp_path / "nothing.sock")
    assert ei.value.errno == errno.ENOENT
    assert "kvx_connect" in ei.value.strerror and "nothing.sock" in ei.value.strerror


def test_connect_not_a_socket_is_econnrefused(tmp_path):
    p = tmp_path / "file"
    p.write_text("")
    with pytest.raises(kvx.Error) as ei:
        kvx.connect(p)
    assert ei.value.errno == errno.ECONNREFUSED


def test_connect_path_too_long():
    with pytest.raises(kvx.Error) as ei:
        kvx.connect("/" + "x" * 200)
    assert ei.value.errno == errno.ENAMETOOLONG


def test_connect_bad_path_values():
    with pytest.raises(ValueError):
        kvx.connect("")
    with pytest.raises(ValueError):
        kvx.connect("/tmp/a\0b")
    with pytest.raises(TypeError):
        kvx.connect(3)


def test_node_name(conn, fake):
    assert conn.node_name == fake.node


def test_connect_wake_ends(fake):
    """wake_ends is taken (a kvxd without rings, as the fake is, serves it on the socket)."""
    with kvx.connect(fake.path, wake_ends=True) as c:
        assert c.node_name == fake.node
    with kvx.Conn(fake.path, 0, False) as c:
        assert c.node_name == fake.node


@pytest.mark.parametrize("code", [errno.ENOENT, errno.EBUSY, errno.EDQUOT])
def test_close_room_errno(conn, fake, code):
    fake.status[(ROOM_CLOSE, 11)] = -code
    with pytest.raises(kvx.Error) as ei:
        conn.close_room(11)
    assert ei.value.errno == code
    assert os.strerror(code) in ei.value.strerror and "kvx_room_close" in ei.value.strerror
    conn.close_room(12)  # the session is unharmed: another room closes fine


def test_close_rooms_one_status_each(conn, fake):
    fake.status[(ROOM_CLOSE, 11)] = -errno.EBUSY
    fake.status[(ROOM_CLOSE, 13)] = -errno.ENOENT
    rooms = [10, 11, 12, 13] + list(range(100, 200))  # more than one window of 64
    st = conn.close_rooms(rooms)
    assert st[:4] == [0, -errno.EBUSY, 0, -errno.ENOENT]
    assert st[4:] == [0] * 100
    conn.close_room(12)  # the session is unharmed
    with pytest.raises(ValueError):
        conn.close_rooms([])
    with pytest.raises((ValueError, OverflowError)):
        conn.close_rooms([-1])


def test_abort_returns_generation_or_ealready(conn, fake):
    assert conn.abort(5) == fake.gen + 1
    fake.status[(ROOM_ABORT, 6)] = -errno.EALREADY
    with pytest.raises(kvx.Error) as ei:
        conn.abort(6)
    assert ei.value.errno == errno.EALREADY


def test_admin_text_and_error_text(conn, fake):
    assert conn.admin("rooms") == "fake reply to rooms"
    fake.admin_replies["fault x:1"] = (-errno.EPERM, "fault: not an admin")
    with pytest.raises(kvx.Error) as ei:
        conn.admin("fault x:1")
    assert ei.value.errno == errno.EPERM and "not an admin" in ei.value.strerror


def test_failed_event_carries_error_and_reason(conn, fake):
    fake.push_event(9, 3, kvx.State.FAILED, -errno.ECONNRESET, "source prefill lost")
    fake.push_event(9, 4, kvx.State.RELEASED)
    evs = list(conn.events(timeout=2))
    assert evs == [kvx.Event(9, 3, kvx.State.FAILED, -errno.ECONNRESET, "source prefill lost"),
                   kvx.Event(9, 4, kvx.State.RELEASED, 0, "")]
    assert evs[0].errno == errno.ECONNRESET
    assert isinstance(evs[0].state, kvx.State) and evs[0].state.name == "FAILED"


def test_state_mirrors_kvx_state_str():
    for s in kvx.State:
        assert kvx._kvx.state_str(s) == s.name
    assert kvx._kvx.state_str(len(kvx.State)) == "?"


def test_read_events_timeout_zero_does_not_wait(conn):
    assert conn.read_events(8, 0) == []


def test_kvxd_gone_is_econnreset(conn, fake):
    fake.push_event(1, 1, kvx.State.SUCCESS)
    fake.hang_up()
    # queued events first, then the reset
    assert conn.read_events(8, 2000) == [kvx.Event(1, 1, kvx.State.SUCCESS, 0, "")]
    with pytest.raises(kvx.Error) as ei:
        conn.read_events(8, 2000)
    assert ei.value.errno == errno.ECONNRESET
    with pytest.raises(kvx.Error) as ei:
        conn.close_room(1)
    assert ei.value.errno == errno.ECONNRESET


def test_closed_conn_refuses(fake):
    c = kvx.connect(fake.path)
    c.close()
    c.close()  # idempotent
    assert c.closed
    for call in (lambda: c.close_room(1), lambda: c.read_events(1, 0), c.fileno,
                 lambda: c.node_name):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_context_manager_closes(fake):
    with kvx.connect(fake.path) as c:
        assert not c.closed
    assert c.closed
