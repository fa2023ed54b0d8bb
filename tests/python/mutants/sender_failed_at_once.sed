# target: python/kvx/connectors/sglang.py
# The bug: a sender whose submission failed part-way says Failed at once, while kvxd may still
# read its source pages (SGLang frees a failed request's pages), and sends no more
s/^            self._state = KVPoll.Transferring$/            self._state = KVPoll.Failed/
