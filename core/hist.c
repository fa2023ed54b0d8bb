/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed log-scale histograms (core/hist.h). */
#include "core/hist.h"

_Static_assert(26 - 3 + 1 <= KVX_HIST_MAX_BUCKETS, "kvx_hist_us fits");
_Static_assert(39 - 10 + 1 <= KVX_HIST_MAX_BUCKETS, "kvx_hist_bytes fits");

const struct kvx_hist_scale kvx_hist_us = {.shift = 3, .n = 26 - 3 + 1, .decimals = 6};
const struct kvx_hist_scale kvx_hist_bytes = {.shift = 10, .n = 39 - 10 + 1, .decimals = 0};
