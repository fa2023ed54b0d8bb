# our own key is written again every RETRY_MS for as long as it does not stay: two nodes of one name and different secrets write in a loop
s/^\t\te->reassert_gap = e->reassert_gap ? e->reassert_gap \* 2 : RETRY_MS;$/\t\te->reassert_gap = RETRY_MS;/
