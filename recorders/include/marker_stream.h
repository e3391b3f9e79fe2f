/* SPDX-License-Identifier: Apache-2.0 */
/* Where a partitioned consumer's marker log lives (marker_log.h): one
 * JetStream stream, a subject per partition ("<base>.<partition>"), one
 * message per record.
 *
 * An append is a JetStream publish under the record's message id
 * (ib_marker_log_msg_id), retried with the same id when its ack does not
 * come, so a retry within the stream's duplicate window is stored once;
 * it returns once the stream has acknowledged the record, which is when
 * the batch's messages may be acked. A replay reads a partition's records
 * in stream order, up to the last one stored when it began, through an
 * ordered consumer (no acks, nothing left behind on the server), and
 * applies each to a table; a record that does not decode, or that names
 * another partition than its subject, stops the replay with an error
 * naming its stream sequence: a partition whose markers cannot all be
 * read must not be taken.
 *
 * Uses the caller's connection (BORROWED); one thread at a time. */
#ifndef IB_MARKER_STREAM_H
#define IB_MARKER_STREAM_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "marker_log.h"
#include "marker_table.h"

typedef struct ib_marker_stream ib_marker_stream;

typedef struct ib_marker_stream_options {
    const char *stream;       /* stream name: one token, no '.', '*', '>', space */
    const char *subject_base; /* records go to "<subject_base>.<partition>" */
    const char *durable;      /* names the records' message ids */
    uint32_t partitions;      /* N, 1..IB_PARTITIONS_MAX: recorded in the stream
                                 that makes it, checked by every opener */
    int replicas;             /* 0: 1 */
    int64_t max_age_ms;       /* how long records are kept (the retention); 0: for ever */
    int64_t timeout_ms;       /* an append's wait for its ack, a replay's for a record;
                                 0: 5000 */
    int attempts;             /* publishes of one append before it fails; 0: 3 */
    bool must_exist;          /* a reader's open (ibus markers): never make the stream;
                                 one that does not exist is IB_ERR_CONFIG */
} ib_marker_stream_options;

/* Opens the log on `nc`, making the stream if it does not exist, with
 * the number of partitions in its description ("ibus marker log,
 * partitions=N"): N is fixed for the stream, and every process of the
 * consumer opens this stream before it pulls. Refused (IB_ERR_CONFIG): a
 * stream of that name that does not take "<subject_base>.>" (it belongs
 * to something else), and one made for another N, with both numbers in
 * the message (a process configured so would put keys in other
 * partitions than its peers). With o->must_exist nothing is made: a
 * stream that does not exist is IB_ERR_CONFIG, saying so (a reader that
 * only replays opens it so). Errors: IB_ERR_CONFIG, IB_ERR_NATS,
 * IB_ERR_NOMEM. `*out` is freed with ib_marker_stream_close. */
ib_status ib_marker_stream_open(ib_marker_stream **out, natsConnection *nc,
                                const ib_marker_stream_options *o, ib_error *err);
void ib_marker_stream_close(ib_marker_stream *s);

/* The log's MaxAge as the stream had it when opened, in ms: how long a
 * record stays, hence how long a marker counts for the next owner; 0 for
 * ever. */
int64_t ib_marker_stream_max_age_ms(const ib_marker_stream *s);

/* Appends `rec` (rec->partition names the subject) and waits for the
 * stream's ack; *seq gets its stream sequence (the first copy's when a
 * retry was dropped as a duplicate). Errors: IB_ERR_INVALID_ARG for a
 * record that does not encode, IB_ERR_NATS when no ack came after every
 * attempt (the record may or may not be stored: append it again, with the
 * same epoch and sequence, and the stream keeps one). */
ib_status ib_marker_stream_append(ib_marker_stream *s, const ib_marker_log_record *rec,
                                  uint64_t *seq, ib_error *err);

/* Appends the `n` records `recs` in order and returns once the stream
 * acknowledged every one: they are sent together and their acks awaited
 * together (one round trip for a recorder call that writes several
 * records), and when any ack is missing or refused, every record is
 * appended again one at a time, as ib_marker_stream_append does (those
 * stored already are dropped as duplicates). Records of one partition
 * are stored in the order given unless a send was lost and the retry
 * stored it after a later one; the log's memory does not depend on the
 * order of records written by one recorder call. Errors: as
 * ib_marker_stream_append's, for the first record that failed (those
 * after it were not appended again). */
ib_status ib_marker_stream_append_all(ib_marker_stream *s, const ib_marker_log_record *recs,
                                      size_t n, ib_error *err);

/* Applies every record of `partition` stored before the call, in order,
 * to `t`; *records (may be NULL) gets how many. Errors: IB_ERR_RECORDER
 * for a record that is not valid (its sequence named), IB_ERR_NATS when
 * the stream cannot be read or stops answering, IB_ERR_NOMEM; the table
 * then holds the records before the one that failed. */
ib_status ib_marker_stream_replay(ib_marker_stream *s, uint32_t partition, ib_marker_table *t,
                                  uint64_t *records, ib_error *err);

#endif
