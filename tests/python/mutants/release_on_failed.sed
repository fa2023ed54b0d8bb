# target: python/kvx/connectors/sglang.py
# The connector hands a failed or aborted receiver's pages back at FAILED instead of RELEASED
# (poll() says Failed while a source may still write into them).
s/^_RECEIVER_PAGES_BACK_ON = (kvx.State.RELEASED,)$/_RECEIVER_PAGES_BACK_ON = (kvx.State.RELEASED, kvx.State.FAILED)/
