/* SPDX-License-Identifier: Apache-2.0 */
/* The recorder of a partitioned consumer (issue 47): it answers every
 * claim and every duplicate from the marker tables of the partitions this
 * process owns, and writes one record per partition per step of a batch
 * to the marker log (marker_log.h has the records' meaning, marker_stream.h
 * the stream they live in).
 *
 * WHY NO KEY PER EVENT. A partition has one owner at a time (its lease,
 * partition_lease.h), and only the owner starts that partition's
 * handlers, so no other process can hold a claim or write a mark of it:
 * the owner decides locally. What it writes is for the next owner, which
 * replays the partition's records into a table before it takes over.
 *
 * HOW THE RECORDER CALLS MAP ONTO RECORDS (recorder.h, "attempts counted
 * as handlers start"):
 *   acquire      ACQUIRED keys: one CLAIMED record per partition before
 *                any call starts; a key left in flight by a process that
 *                died in its call is reported taken over, so it runs
 *                alone with its attempt counted first. A counted first
 *                key (or every key, for callers that do not defer) adds
 *                a COUNTED record.
 *   count        COUNTED (a call that may not return is about to start).
 *   release      COUNTED for the calls that returned without success,
 *                then RELEASED for every key freed.
 *   mark         DONE; the caller acks only after it returns.
 *   end attempts ENDED.
 * Each append waits for the stream's ack; a failed append fails the call
 * with IB_ERR_RECORDER and changes nothing in memory (the record may still
 * have been stored: the next owner may then see a key in flight that was
 * not, which costs that call one attempt and a run alone, never a lost
 * mark). Every record gets the next sequence of the partition's epoch,
 * failed or not, so a record that was stored is never dropped as the
 * duplicate of another.
 *
 * WHICH PARTITION. An event's partition comes from its subject (its key
 * need not be its id), so the caller routes each event id to its
 * partition (ib_log_recorder_route) before the calls that name it. A key
 * whose id is not routed, or routed to a partition this process does not
 * own, is answered BUSY by a claim and refused by a mark: nothing of a
 * partition another process may own is ever decided here. Neither is
 * anything new past the partition's stop time (ib_log_recorder_hold_until).
 *
 * One lock guards the tables and the routes, and is held across the
 * appends of one call: the batch thread is the only writer, and the
 * control thread's reads (a probe, the markers gauge) wait for at most
 * one append. */
#ifndef IB_LOG_RECORDER_H
#define IB_LOG_RECORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "marker_stream.h"
#include "marker_table.h"
#include "recorder.h"

/* A recorder that writes to `stream` (BORROWED: it must outlive the
 * recorder) for `partitions` partitions, owning none yet. Closed with
 * ib_recorder_close. Errors: IB_ERR_INVALID_ARG (no stream, partitions
 * out of 1..IB_PARTITIONS_MAX), IB_ERR_NOMEM. */
ib_status ib_log_recorder_create(ib_recorder **out, ib_marker_stream *stream, uint32_t partitions,
                                 ib_error *err);

/* Makes the recorder answer for `partition` from `table` (OWNED from
 * here on, also on failure), writing its records under lease `epoch`
 * from sequence 1. A partition owned already has its table replaced.
 * Errors: IB_ERR_INVALID_ARG for a partition out of range. */
ib_status ib_log_recorder_own(ib_recorder *r, uint32_t partition, uint64_t epoch,
                              ib_marker_table *table, ib_error *err);

/* Makes the recorder decide nothing new for `partition` from
 * `stop_at_mono` (monotonic ms) on: past it a claim is answered BUSY, a
 * count or a renewal finds the key not held, so no call of the partition
 * starts (the dispatch asks before each call whose claim is older than
 * its lease); marks and ends of attempts, which record what happened,
 * are still written. The owner moves it on at every renewal of the
 * partition's lease (ib_partition_lease_stop_at): a process stopped
 * past its lease starts nothing once it runs again. Until the first
 * call: no limit. */
void ib_log_recorder_hold_until(ib_recorder *r, uint32_t partition, int64_t stop_at_mono);

/* Stops answering for `partition` and frees its table; a no-op when not
 * owned. */
void ib_log_recorder_disown(ib_recorder *r, uint32_t partition);

/* Whether `partition` is owned. */
bool ib_log_recorder_owns(ib_recorder *r, uint32_t partition);

/* Routes `event_id` (normalised) to `partition` for the calls that
 * follow, until ib_log_recorder_routes_clear. Errors: IB_ERR_INVALID_ARG
 * (an id not normalised, a partition out of range), IB_ERR_NOMEM. */
ib_status ib_log_recorder_route(ib_recorder *r, const char *event_id, uint32_t partition,
                                ib_error *err);
void ib_log_recorder_routes_clear(ib_recorder *r);

/* What a partition's table holds: pairs and marked pairs, records
 * applied and the stale ones among them; all 0 when not owned. */
ib_marker_table_stats ib_log_recorder_partition_stats(ib_recorder *r, uint32_t partition);

#endif
