/* SPDX-License-Identifier: Apache-2.0 */
/* Pipelined reads of the kv: recorder through the stream leader, and the
 * epoch search (kv_read.c); the layout is in kv_io.h. */
#ifndef IB_KV_READ_H
#define IB_KV_READ_H

#include "kv_io.h"

/* Reads the last message of each of `n` subjects through the leader,
 * all requests in flight at once (kv_read.c). */
ib_status ib__kv_read_many(kv_recorder *k, kv_read *out, const char (*subjects)[KV_SUBJECT_MAX],
                           size_t n, ib_error *err);

/* Reads the done marker and the highest claim epoch of `key`; the batch
 * form reads every key's in the same few pipelined rounds. */
ib_status ib__kv_read_head(kv_recorder *k, kv_head *h, const ib_marker_key *key, ib_error *err);
ib_status ib__kv_read_heads(kv_recorder *k, kv_head *h, const ib_marker_key *keys, size_t n,
                            ib_error *err);

#endif
