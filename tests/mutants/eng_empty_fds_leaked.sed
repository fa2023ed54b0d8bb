# a message of no bytes (read as the end of the stream) leaves the descriptors it brought open in kvxd
s/^\t\tfor (struct cmsghdr \*c = n >= 0 ? CMSG_FIRSTHDR(\&mh) : NULL; c;$/\t\tfor (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(\&mh) : NULL; c;/
