/* SPDX-License-Identifier: Apache-2.0 */
/* The kv: recorder's connection, bucket binding and admin walks
 * (kv_bucket.c). */
#ifndef IB_KV_BUCKET_H
#define IB_KV_BUCKET_H

#include "kv_io.h"

/* Connection and bucket: see kv_bucket.c. */
ib_status ib__kv_connect(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err);
ib_status ib__kv_bind(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err);
void ib__kv_disconnect(kv_recorder *k);
ib_status ib__kv_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err);
/* ib_recorder_attempt_stats: a walk over every key, reading the highest
 * epoch of each id that is not done. */
ib_status ib__kv_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                               ib_error *err);
ib_status ib__kv_list(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err);
/* ib__recorder_summarize: a walk over every key, reading each marker and
 * the newest epoch of each id that is not done. */
ib_status ib__kv_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                           uint32_t max_attempts, ib_error *err);

#endif
