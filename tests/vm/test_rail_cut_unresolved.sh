#!/bin/bash
# kvx-vm: rails 2
# test_rail_cut_unresolved.sh: test_rail_cut.sh with the cut outlasting the first retry of rail
# 1 and rail 1's neighbour entries flushed, so that retry's handshake cannot reach the peer on
# rail 1 (the path CI's counters point to); rail 1 still carries rooms again once the link is back.
RAIL_CUT=unresolved
. "$(dirname "$0")/test_rail_cut.sh"
