/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What kvxd exports (layer 6 of control/, control/README.md): every counter of the control core
 * and of each polling core (struct kvxd_core_stats, read relaxed; a `core` label), gauges (rooms
 * in the tables, peers by state, engines, pools, live QPs, ...) and the histograms of
 * struct kvxd_hists, rendered in one pass as the Prometheus text exposition format (version
 * 0.0.4) or as JSON.  One walk over the metrics feeds both formats, so they cannot disagree.
 *
 * Thread: the control core only (it reads the control core's plain fields).  Never blocks; the
 * cost is linear in cores, peers and fault points, never in rooms.
 */
#ifndef KVX_CONTROL_METRICS_H
#define KVX_CONTROL_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "control/kvxd.h"

enum kvxd_metrics_format {
	KVXD_METRICS_TEXT = 0, /* text/plain; version=0.0.4 */
	KVXD_METRICS_JSON,     /* {"node": NAME, "metrics": {NAME: {"type", "samples": [...]}}} */
};

#define KVXD_METRICS_HELP 1u /* text: a # HELP line before each # TYPE line */

/* Where the output goes: the caller's fixed buffer (grow false), or a malloc'd one that grows up
 * to max (grow true; p may start NULL; free it with kvxd_metrics_buf_fini). */
struct kvxd_metrics_buf {
	char *p;
	size_t len, cap, max;
	bool grow;
	bool overflow; /* something did not fit: the output is incomplete */
};

/* Render every metric into b (appended, NUL-terminated).  Returns 0, or -EMSGSIZE when it did
 * not fit in b (b->overflow set: discard the output). */
int kvxd_metrics_render(struct kvxd *d, enum kvxd_metrics_format fmt, unsigned flags,
			struct kvxd_metrics_buf *b);

void kvxd_metrics_buf_fini(struct kvxd_metrics_buf *b);
/* printf into b (appended; b->overflow set when it does not fit). */
void kvxd_metrics_buf_printf(struct kvxd_metrics_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* KVX_CONTROL_METRICS_H */
