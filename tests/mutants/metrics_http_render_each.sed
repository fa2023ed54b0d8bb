# every scrape renders the exposition anew: a client scraping in a loop keeps the control core rendering
s/^\treturn h->cache.p \&\& now >= h->cache_at \&\& now < h->cache_at + CACHE_MS;$/\treturn false;/
