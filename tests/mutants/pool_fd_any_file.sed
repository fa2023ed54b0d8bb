# a pool's fd may be any regular file: one of a FUSE filesystem the engine serves holds the control core in the MR registration's page faults
s/^\tif (!S_ISREG(st.st_mode) || !pool_fd_is_memory(fd, &granule)) {$/\tif (!S_ISREG(st.st_mode)) {/
