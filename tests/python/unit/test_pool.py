# SPDX-License-Identifier: Apache-2.0
"""Pools: a memfd of page_size x npages x nbufs bytes (computed in 64 bits), mapped shared,
buffer-major pages; registered with kvxd by Conn.pool (fake kvxd)."""
import errno
import os
import threading

import pytest

import kvx
from fakekvxd import POOL_REG, POOL_UNREG

try:
    import numpy
except ImportError:
    numpy = None


def test_geometry_and_layout():
    with kvx.PoolMemory(128, 5, 3) as m:
        assert m.nbytes == 128 * 5 * 3 == len(m.buffer) == os.fstat(m.fileno()).st_size
        assert os.readlink(f"/proc/self/fd/{m.fileno()}").startswith("/memfd:kvx-pool")
        assert m.offset(0, 0) == 0 and m.offset(2, 4) == (2 * 5 + 4) * 128
        v = m.page(1, 2)
        assert len(v) == 128 and not v.readonly
        v[:] = bytes(range(128))
        # the same bytes, read through the memfd itself: what kvxd will map
        assert os.pread(m.fileno(), 128, (1 * 5 + 2) * 128) == bytes(range(128))
        m.buffer[0:4] = b"abcd"
        assert os.pread(m.fileno(), 4, 0) == b"abcd"
        del v


@pytest.mark.parametrize("b,p", [(-1, 0), (3, 0), (0, -1), (0, 5)])
def test_page_out_of_range(b, p):
    with kvx.PoolMemory(64, 5, 3) as m:
        with pytest.raises(IndexError):
            m.page(b, p)


@pytest.mark.parametrize("geo,exc", [((100, 1, 1), ValueError), ((0, 1, 1), ValueError),
                                     ((32 << 20, 1, 1), ValueError), ((64, 0, 1), ValueError),
                                     ((64, 1, 0), ValueError), ((64, 2**32, 1), ValueError),
                                     (("64", 1, 1), TypeError), ((64.0, 1, 1), TypeError),
                                     # 16 MiB x 2^20 x 2^20 = 2^64: refused, never allocated
                                     ((16 << 20, 1 << 20, 1 << 20), ValueError),
                                     ((4096, 1 << 20, 17), ValueError)])  # 68 GiB > 64 GiB
def test_bad_geometry(geo, exc):
    with pytest.raises(exc):
        kvx.PoolMemory(*geo)


def test_product_over_32_bits_is_exact():
    # 64 KiB x 65536 pages x 1 = 4 GiB: wraps to 0 in 32 bits; sparse memfd, nothing touched
    with kvx.PoolMemory(64 << 10, 1 << 16, 1) as m:
        assert m.nbytes == 1 << 32 == os.fstat(m.fileno()).st_size
        assert m.offset(0, (1 << 16) - 1) == (1 << 32) - (64 << 10)
        assert len(m.page(0, (1 << 16) - 1)) == 64 << 10


@pytest.mark.skipif(numpy is None, reason="numpy not installed")
def test_numpy_array_shares_memory():
    with kvx.PoolMemory(64, 4, 2) as m:
        a = m.array()
        assert a.shape == (2, 4, 64) and a.dtype == numpy.uint8
        a[1, 3, :] = 7
        assert bytes(m.page(1, 3)) == b"\x07" * 64
        del a


def test_close_with_a_view_held():
    m = kvx.PoolMemory(64, 1, 1)
    v = m.page(0, 0)
    m.close()  # a view is exported: the mapping stays valid for it
    assert m.closed
    v[0] = 1
    assert v[0] == 1


def test_conn_pool_registers_memfd(conn, fake):
    with conn.pool(256, 8, 2) as pool:
        assert pool.id == 1
        assert fake.requests[-1] == (POOL_REG, dict(page_size=256, npages=8, nbufs=2))
        assert fake.pool_sizes == [256 * 8 * 2]
    assert fake.requests[-1] == (POOL_UNREG, dict(pool_id=1))


def test_pool_bad_geometry_sends_nothing(conn, fake):
    with pytest.raises(ValueError):
        conn.pool(100, 1, 1)
    assert fake.requests == []


def test_pool_close_retries_ebusy(conn, fake):
    # kvxd answers EBUSY while its cores still hold the pool: close() asks again
    with conn.pool(256, 8, 2) as pool:
        fake.status[(POOL_UNREG, pool.id)] = -errno.EBUSY
        threading.Timer(0.2, lambda: fake.status.pop((POOL_UNREG, pool.id))).start()
    assert fake.count(POOL_UNREG) > 1 and fake.requests[-1] == (POOL_UNREG, dict(pool_id=1))


def test_pool_close_gives_up(conn, fake):
    pool = conn.pool(256, 8, 2)
    fake.status[(POOL_UNREG, pool.id)] = -errno.EBUSY
    with pytest.raises(kvx.Error) as ei:
        pool.close(busy_timeout=0.1)
    assert ei.value.errno == errno.EBUSY and pool.closed
