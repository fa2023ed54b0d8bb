# histogram buckets exported per bucket instead of cumulatively
s/^\t\tcum += h->bucket\[i\];$/\t\tcum = h->bucket[i];/
