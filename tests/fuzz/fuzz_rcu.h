/* SPDX-License-Identifier: Apache-2.0 */
/* Deterministic call_rcu() for the fuzz targets (see fuzz_rcu.c). */
#ifndef KVX_TESTS_FUZZ_RCU_H
#define KVX_TESTS_FUZZ_RCU_H

/* Wait for a grace period and run every queued callback (and those they queue). */
void fuzz_rcu_flush(void);

#endif /* KVX_TESTS_FUZZ_RCU_H */
