# decode counts a source's share whole at its first immediate, while another rail may still
# carry the source's bytes
s/^\tif (++r->imm_seen\[src\] == want)$/\tif (++r->imm_seen[src] >= 1)/
