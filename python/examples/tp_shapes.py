#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Room shapes: a prefill engine with TP 2 (two ranks, each holding half of the attention heads
of every page) feeds a decode engine with TP 1, layer by layer.  Both prefill ranks use the
same room ids; the decode room names both as sources, each with its slice of the page.  Both
kvxd must be running (tests/vm/python_example.sh starts them in the VM)."""
import os
import sys

import kvx

PAGE, PAGES, LAYERS, ROOMS = 4096, 4, 3, 2
HALF = PAGE // 2

decode = kvx.connect("/run/kvx/decode.sock", rank=0)
ranks = [kvx.connect("/run/kvx/prefill.sock", rank=k) for k in range(2)]
dst = decode.pool(PAGE, PAGES * ROOMS, LAYERS)
src = [r.pool(HALF, PAGES * ROOMS, LAYERS) for r in ranks]
for s in src:
    s.buffer[:] = os.urandom(s.nbytes)  # each rank's heads of every page and layer
for room in range(ROOMS):
    pages = list(range(room * PAGES, (room + 1) * PAGES))
    sources = [kvx.Source("prefill", k, [kvx.Slice(0, k * HALF, HALF)]) for k in range(2)]
    decode.open_room_regions(room, [kvx.Region(dst, pages)], sources)
for layer in range(LAYERS):  # as each layer's prefill is done
    for room in range(ROOMS):
        pages = list(range(room * PAGES, (room + 1) * PAGES))
        for k, r in enumerate(ranks):
            r.submit(room, layer, src[k], pages, last=layer == LAYERS - 1,
                     buf_first=layer, buf_count=1)
    print(f"layer {layer}: {ROOMS} rooms x 2 ranks submitted")
for name, conn in [("decode", decode), ("prefill rank 0", ranks[0]), ("prefill rank 1", ranks[1])]:
    ended = 0
    for ev in conn.events(timeout=30):
        if ev.state in (kvx.State.SUCCESS, kvx.State.FAILED, kvx.State.RELEASED):
            print(f"{name}: room {ev.room} {ev.state.name} {ev.reason}".rstrip())
            conn.close_room(ev.room)
            ended += 1
            if ended == ROOMS:
                break
bad = sum(bytes(dst.page(b, p))[k * HALF:(k + 1) * HALF] != bytes(src[k].page(b, p))
          for p in range(PAGES * ROOMS) for b in range(LAYERS) for k in range(2))
print(f"{ROOMS} rooms x {PAGES} pages x {LAYERS} layers, 2 head slices each: {bad} slices differ")
for p in [dst] + src:
    p.close()
for c in [decode] + ranks:
    c.close()
sys.exit(1 if bad else 0)
