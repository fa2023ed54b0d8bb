# SPDX-License-Identifier: Apache-2.0
"""Errors from a real kvxd reach Python as kvx.Error with the errno kvx.h documents."""
import errno

import pytest

import kvx


def test_close_unknown_room_is_enoent(decode, prefill):
    for conn in (decode, prefill):
        with pytest.raises(kvx.Error) as ei:
            conn.close_room(987654321)
        assert ei.value.errno == errno.ENOENT


def test_abort_unknown_room_is_enoent(decode):
    with pytest.raises(kvx.Error) as ei:
        decode.abort(987654322)
    assert ei.value.errno == errno.ENOENT


def test_open_room_refusals(decode):
    """kvxd's refusals of a room open (control/engine.c), each with its errno."""
    with pytest.raises(kvx.Error) as ei:
        decode.open_room(5, 4242, [0], ["prefill"])  # no such pool
    assert ei.value.errno == errno.ENOENT
    with decode.pool(4096, 4, 1) as pool:
        with pytest.raises(kvx.Error) as ei:
            decode.open_room(5, pool, [4], ["prefill"])  # a page beyond the pool
        assert ei.value.errno == errno.ERANGE
        with pytest.raises(kvx.Error) as ei:
            decode.open_room(5, pool, [0], ["nosuchnode"])  # not a peer of this node
        assert ei.value.errno == errno.EHOSTUNREACH
    with pytest.raises(kvx.Error) as ei:
        decode.close_room(5)  # none of them left a room behind
    assert ei.value.errno == errno.ENOENT


def test_operator_command_and_admin_text(decode):
    assert "peer prefill" in decode.admin("peers")
