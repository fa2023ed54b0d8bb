#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Move a few rooms from a prefill kvxd to a decode kvxd with the kvx Python package and check
every byte.  Both kvxd must be running (tests/vm/python_example.sh starts them in the VM)."""
import os
import sys

import kvx

PAGE, PAGES, BUFS, ROOMS = 4096, 8, 2, 4

with kvx.connect("/run/kvx/prefill.sock") as prefill, kvx.connect("/run/kvx/decode.sock") as decode:
    print(f"libkvx {kvx.version()}: prefill node {prefill.node_name!r}, decode node {decode.node_name!r}")
    with prefill.pool(PAGE, PAGES * ROOMS, BUFS) as src, decode.pool(PAGE, PAGES * ROOMS, BUFS) as dst:
        src.buffer[:] = os.urandom(src.nbytes)  # the "KV cache" prefill computed
        for room in range(ROOMS):
            pages = list(range(room * PAGES, (room + 1) * PAGES))
            gen = decode.open_room(room, dst, pages[::-1], sources=["prefill"])  # reversed pages
            for c in range(2):  # two chunks of 4 pages
                half = pages[c * 4:(c + 1) * 4]
                prefill.submit(room, c, src, half, dst_offset=c * 4, last=c == 1)
            print(f"room {room}: opened (generation {gen}), 2 chunks submitted")
        for side, conn in (("decode", decode), ("prefill", prefill)):
            done = 0
            for ev in conn.events(timeout=30):
                if ev.state in (kvx.State.SUCCESS, kvx.State.FAILED, kvx.State.RELEASED):
                    print(f"{side}: room {ev.room} {ev.state.name} {ev.reason}".rstrip())
                    conn.close_room(ev.room)
                    done += 1
                    if done == ROOMS:
                        break
        bad = sum(bytes(dst.page(b, (room + 1) * PAGES - 1 - i)) != bytes(src.page(b, room * PAGES + i))
                  for room in range(ROOMS) for i in range(PAGES) for b in range(BUFS))
        print(f"{ROOMS} rooms x {PAGES} pages x {BUFS} buffers x {PAGE} B: {bad} pages differ")
        sys.exit(1 if bad else 0)
