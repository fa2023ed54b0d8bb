# SPDX-License-Identifier: Apache-2.0
"""VM tests of the Python package: a prefill and a decode kvxd are running (tests/vm/
test_python.sh starts them; configs/prefill.ini and configs/decode.ini)."""
import os

import pytest

import kvx

PREFILL_SOCK = os.environ.get("KVX_PREFILL_SOCK", "/run/kvx/prefill.sock")
DECODE_SOCK = os.environ.get("KVX_DECODE_SOCK", "/run/kvx/decode.sock")


@pytest.fixture
def prefill():
    with kvx.connect(PREFILL_SOCK) as c:
        yield c


@pytest.fixture
def decode():
    with kvx.connect(DECODE_SOCK) as c:
        yield c


def pattern(seed: int, n: int) -> bytes:
    """n bytes that depend on seed (a room, page and buffer), cheap to make."""
    import hashlib

    block = hashlib.sha256(seed.to_bytes(16, "little")).digest()
    return (block * (n // len(block) + 1))[:n]
