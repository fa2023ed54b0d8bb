# a refused session whose socket does not take its answer now is kept until the answer goes (never, when the engine does not read)
/^\tif (e->refused) {$/,/^\t\tgoto out;$/{
/e->outq_head ? "session refused (its answers left unread)"/,+1d
s/^\t\tkvxd_engine_doom(d, e,$/\t\tif (!e->outq_head)\n\t\t\tkvxd_engine_doom(d, e, "session refused");/
}
