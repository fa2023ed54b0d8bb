# a reply or event that does not fit the event ring is dropped (counted as sent)
s/	return rc == -ENOBUFS ? -EAGAIN : rc;/	return rc == -ENOBUFS ? (ssize_t)len : rc;/
