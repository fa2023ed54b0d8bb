# "counters" for an engine that is not an operator is rendered afresh every time
s/^\t\treturn admin ? kvxd_metrics_render(d, f, 0, b) : counters_cached(d, f, b);$/\t\treturn kvxd_metrics_render(d, f, 0, b);/
