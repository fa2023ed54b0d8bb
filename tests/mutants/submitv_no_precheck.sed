# kvx_chunk_submitv checks each chunk only as it sends it: a bad chunk cuts a batch part-way
s/^\t\tif (!chunk_valid(\&chunks\[i\]))$/\t\tif (0)/
