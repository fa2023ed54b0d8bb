# a chunk's destination pages are counted from the region's first, not from its dst_offset
s/g->pages\[ch->dst_offset + /g->pages[/g
