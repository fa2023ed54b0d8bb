# events share the fixed reply_queue_kb with replies: a burst of room ends (a source lost with hundreds of rooms) closes the session of an engine that reads, and the rest of the ends are lost
s/^\tif (event && rooms > limit)$/\tif (0)/
