# a pool does not hold the rank, only a room does: another user's engine that takes a room first, after the first engine registered its pools, gets the rank
s/^\tif (!rank_held_by_another(d, e))$/\tif (0)/
