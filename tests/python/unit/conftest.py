# SPDX-License-Identifier: Apache-2.0
import os
import sys

import pytest

# tests/python: the fake kvxd
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["KVX_RINGS"] = "0"  # the fake speaks the socket protocol only (it refuses RINGS too)

from fakekvxd import FakeKvxd  # noqa: E402

import kvx  # noqa: E402


@pytest.fixture
def fake():
    f = FakeKvxd()
    yield f
    f.close()


@pytest.fixture
def conn(fake):
    c = kvx.connect(fake.path)
    yield c
    c.close()
