# a pool on huge pages is mapped and unmapped by its geometry's length: the munmap of less than a huge page fails, and the mapping stays for good
s/^\tmap = (len + granule - 1) \/ granule \* granule; \/\* <= 64 GiB + 1 GiB \*\/$/\tmap = len;/
