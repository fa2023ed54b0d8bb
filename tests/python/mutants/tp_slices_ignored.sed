# target: python/kvx/connectors/sglang.py
# A decode rank of a smaller TP than prefill's takes each source's page into offset 0 of its
# own page (every source's heads land on the first ones: the head slices are lost).
s/\[kvx.Slice(0, j \* sub, sub) if per > 1 else None\])/[kvx.Slice(0, 0, sub) if per > 1 else None])/
