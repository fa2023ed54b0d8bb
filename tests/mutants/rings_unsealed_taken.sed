# libkvx maps a ring file whose seals cannot be read (a file without seals: it may shrink under the engine, a SIGBUS)
s/^\tif (!S_ISREG(st.st_mode) || seals < 0 || !(seals \& F_SEAL_SHRINK) ||$/\tif (!(seals \& F_SEAL_SHRINK) ||/
