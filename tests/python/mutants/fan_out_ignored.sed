# target: python/kvx/connectors/sglang.py
# A prefill room feeds one decode rank whatever the TP sizes (the other ranks never get data).
s/return max(1, self.args.peer_tp_size \/\/ self.args.tp_size)/return 1/
