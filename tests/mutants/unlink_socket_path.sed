# whatever sits at the engine socket path is deleted (the old listen)
s/^\trc = path_claim(d, path);$/\trc = unlink(path) < 0 \&\& errno != ENOENT ? -errno : 0;/
