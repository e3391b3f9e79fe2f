/* SPDX-License-Identifier: Apache-2.0 */
/* Partition leases (issue 47, item 3): which process owns a partition
 * now, decided by writes that exactly one of several racers can win.
 *
 * THE TECHNIQUE is the one kv: uses for claims: a lease is a sequence of
 * epochs, each a key "p.<partition>.<epoch>" of a JetStream key-value
 * bucket written once, by Create (expect no message). Of several
 * processes that create the same next epoch exactly one succeeds, also on
 * a replicated bucket of nats-server 2.9, where Update(revision) is not
 * safe. Taking, renewing and releasing all create the next epoch; nothing
 * is ever changed in place. The newest epoch is the last message on
 * "p.<partition>.*", read through the stream's leader (js_GetLastMsg), not
 * a follower that may be behind.
 *
 * AN EPOCH'S VALUE is "ibus-lease v1 <owner> <end>": the owner's token
 * (printable, no space) and the lease's end in unix ms, 0 for a lease
 * given back. A value that is not so (written by another tool) is never
 * taken as free: the partition is reported unreadable and not taken.
 *
 * THE CLOCKS. Ends are wall-clock ms because owners run on several
 * hosts, whose clocks must agree to well within a lease. An owner must
 * stop starting handlers before its lease can end by its own monotonic
 * reckoning: ib_partition_lease_stop_at gives that moment, a margin of a
 * quarter of the lease (at least 1 s) before the end it wrote, measured
 * from when it sent the write, so a write that took long or a clock that
 * runs slow never lets two owners start calls at once unless the hosts'
 * clocks disagree by more than the margin.
 *
 * The bucket is BORROWED; one thread at a time per lease object. */
#ifndef IB_PARTITION_LEASE_H
#define IB_PARTITION_LEASE_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define IB_LEASE_OWNER_MAX 128

/* What the newest epoch of a partition says. */
typedef struct ib_lease_state {
    uint64_t epoch; /* 0: the partition was never leased */
    char owner[IB_LEASE_OWNER_MAX + 1];
    int64_t end_ms; /* unix ms; 0: given back */
} ib_lease_state;

/* What a take or a renewal came to. */
typedef enum ib_lease_result {
    IB_LEASE_OURS = 1, /* we hold the new epoch */
    IB_LEASE_HELD,     /* another owner's lease runs (state says whose, until when) */
    IB_LEASE_LOST,     /* another process created that epoch first, or (renew) the
                          newest epoch is not ours any more */
} ib_lease_result;

/* Reads the newest epoch of `partition` in `kv` (the bucket `bucket`,
 * whose stream is "KV_<bucket>"). Errors: IB_ERR_NATS; IB_ERR_RECORDER
 * for a value that is not a lease (the partition must not be taken). */
ib_status ib_partition_lease_read(jsCtx *js, const char *bucket, uint32_t partition,
                                  ib_lease_state *out, ib_error *err);

/* Takes `partition` for `owner` for `lease_ms` from `now_ms` (unix ms),
 * when the newest epoch is free (never leased, given back, or past its
 * end) or already `owner`'s: creates the next epoch. *state is the
 * newest epoch after the attempt. */
ib_status ib_partition_lease_take(kvStore *kv, jsCtx *js, const char *bucket, uint32_t partition,
                                  const char *owner, int64_t lease_ms, int64_t now_ms,
                                  ib_lease_result *result, ib_lease_state *state, ib_error *err);

/* Renews the lease `held` (what a take or the last renewal returned) to
 * `now_ms + lease_ms`, or gives it back (`lease_ms` 0), by creating the
 * next epoch, only while `held` is still the newest. IB_LEASE_LOST: it
 * is not (the lease ran out and another took it): stop at once. */
ib_status ib_partition_lease_renew(kvStore *kv, jsCtx *js, const char *bucket, uint32_t partition,
                                   const ib_lease_state *held, int64_t lease_ms, int64_t now_ms,
                                   ib_lease_result *result, ib_lease_state *state, ib_error *err);

/* The monotonic ms (sent_mono_ms: when the write that set `lease_ms`
 * was sent) past which the owner must start no handler of the partition. */
int64_t ib_partition_lease_stop_at(int64_t sent_mono_ms, int64_t lease_ms);

/* Reads an epoch's value, "ibus-lease v1 <owner> <end>", of `len` bytes
 * into out->owner and out->end_ms; false when the bytes are anything
 * else (then `out` may be half written). For the reads above and the
 * fuzz target. */
bool ib__lease_value_parse(ib_lease_state *out, const char *v, size_t len);

#endif
