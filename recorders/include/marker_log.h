/* SPDX-License-Identifier: Apache-2.0 */
/* The marker log of a partition (issue 47): its records, and the markers
 * they add up to, held in memory by the partition's owner.
 *
 * WHY A LOG. A partition has one owner at a time (a lease). The owner
 * alone starts that partition's handlers, so it needs no conditional
 * write per event to learn whether another process got there first: it
 * answers every claim and every duplicate from memory, and writes one
 * record per batch, appended to a JetStream stream, so that the next
 * owner (after a handover or a crash) can rebuild the same memory. No key
 * per id lives on the server; the records expire with the retention.
 *
 * THE RECORDS. A batch appends these to its partition's subject:
 *   CLAIMED   before its handlers run: the (consumer, id) pairs whose
 *             calls are about to start, each with its event's
 *             fingerprint. Each pair is then in flight. A crash during
 *             the calls leaves them in flight, and the next owner runs
 *             each such call alone with its attempt counted first, as the
 *             marker file treats a claim taken over from a dead holder:
 *             the event that kills its process spends its own attempts,
 *             never its batch mates'.
 *   COUNTED   one handler attempt of each pair is counted (the poison
 *             rule's count): written as a call that may not return
 *             starts (the first call of a batch, a call taken over), or
 *             as a call that returned without success is freed.
 *   RELEASED  these pairs are no longer in flight and not marked: their
 *             calls returned without success, or never started (the
 *             batch ended first).
 *   DONE      after the calls, once they said OK: the pairs now marked.
 *             The batch's messages are acked only after this record is
 *             stored (the server acknowledged the append).
 *   ENDED     the attempts of these pairs are over (their event was
 *             dead-lettered): a redelivery, a replay or a republish of
 *             the id starts with a fresh budget, as
 *             ib_recorder_end_attempts does for the other kinds.
 * Each append carries a message id of the owner's lease epoch and its
 * record number (ib_marker_log_msg_id), so a retried append is stored
 * once within the stream's duplicate window.
 *
 * THE FORMAT (version 1; every integer little-endian):
 *   0   4  magic "IBML"
 *   4   1  version, 1
 *   5   1  kind: 1 CLAIMED, 2 DONE, 3 ENDED, 4 COUNTED, 5 RELEASED
 *   6   2  consumers C, 1..IB_MARKER_LOG_CONSUMERS_MAX
 *   8   4  partition
 *   12  8  epoch: the writer's lease epoch
 *   20  8  sequence: the writer's record number in that epoch, from 1
 *   28  4  entries E, 1..IB_MARKER_LOG_ENTRIES_MAX
 *   32     C consumer names: a length byte (1..255), then that many
 *          bytes of UTF-8 with no control character
 *   then   E entries of 26 bytes: the consumer's index (2, < C), the
 *          id's 16 bytes (ib_id_pack), the fingerprint (8)
 * and nothing after. A record is read whole or refused: a wrong magic,
 * version or kind, a count out of range, a name or an index that is not
 * valid, a length that does not add up. A refused record stops its
 * partition (the owner does not take it) with an error naming the
 * record; it is never skipped, since skipping a DONE would run its
 * handlers again.
 *
 * THE MEMORY. Records are applied in the order the stream holds them,
 * each to the pairs not marked yet (the first mark stands, as in the
 * marker file): CLAIMED puts each pair in flight (keeping the
 * fingerprint of its first claim); COUNTED adds one attempt; RELEASED
 * takes it out of flight; DONE marks it with its fingerprint; ENDED sets
 * its attempts to 0 and takes it out of flight. A record of an epoch lower
 * than one applied before was written by an
 * owner that had lost its lease: it is applied all the same (its calls
 * ran; a mark is a fact), and counted, so a handover that let a stale
 * owner write shows in the metrics. */
#ifndef IB_MARKER_LOG_H
#define IB_MARKER_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define IB_MARKER_LOG_VERSION 1
#define IB_MARKER_LOG_HEADER 32u        /* bytes before the names */
#define IB_MARKER_LOG_ENTRY 26u         /* bytes per entry */
#define IB_MARKER_LOG_CONSUMERS_MAX 64u /* consumers named in one record */
#define IB_MARKER_LOG_ENTRIES_MAX 4096u /* entries in one record */
#define IB_MARKER_LOG_NAME_MAX 255u     /* bytes of a consumer name */

typedef enum ib_marker_log_kind {
    IB_MARKER_LOG_CLAIMED = 1,
    IB_MARKER_LOG_DONE = 2,
    IB_MARKER_LOG_ENDED = 3,
    IB_MARKER_LOG_COUNTED = 4,
    IB_MARKER_LOG_RELEASED = 5,
} ib_marker_log_kind;

/* One entry: which consumer (an index into the record's names), which
 * event (its normalised id, packed) and its fingerprint. */
typedef struct ib_marker_log_entry {
    uint16_t consumer;
    uint8_t id[16];
    uint64_t fingerprint;
} ib_marker_log_entry;

/* A record, decoded or to encode. The names and entries are BORROWED: on
 * decode they point into the caller's `names` buffer and `entries` array
 * (see ib_marker_log_decode). */
typedef struct ib_marker_log_record {
    ib_marker_log_kind kind;
    uint32_t partition;
    uint64_t epoch;
    uint64_t sequence;
    const char *const *names; /* `nnames` NUL-terminated consumer names */
    size_t nnames;
    const ib_marker_log_entry *entries;
    size_t nentries;
} ib_marker_log_record;

/* The size ib_marker_log_encode needs for `rec`. */
size_t ib_marker_log_size(const ib_marker_log_record *rec);

/* Writes `rec` into `out` (`cap` bytes) and sets *len. Errors:
 * IB_ERR_INVALID_ARG when the record breaks a rule of the format (a count
 * out of range, a name empty, too long or not valid UTF-8 without control
 * characters, an index past the names) or does not fit in `cap`; nothing
 * is written then. */
ib_status ib_marker_log_encode(const ib_marker_log_record *rec, uint8_t *out, size_t cap,
                               size_t *len, ib_error *err);

/* Room for a decoded record's names: up to IB_MARKER_LOG_CONSUMERS_MAX of
 * them, NUL-terminated, and the pointers to them. */
typedef struct ib_marker_log_names {
    char text[IB_MARKER_LOG_CONSUMERS_MAX * (IB_MARKER_LOG_NAME_MAX + 1)];
    const char *at[IB_MARKER_LOG_CONSUMERS_MAX];
} ib_marker_log_names;

/* Reads the record of `len` bytes at `in` into *rec, its names into
 * `names` and its entries into `entries` (room for `cap` of them; at most
 * IB_MARKER_LOG_ENTRIES_MAX are ever needed), all owned by the caller.
 * Errors: IB_ERR_INVALID_ARG, saying which rule the bytes break (never
 * quoting them) when the record is not valid version 1, or has more
 * entries than `cap`; *rec is then unspecified. */
ib_status ib_marker_log_decode(ib_marker_log_record *rec, const uint8_t *in, size_t len,
                               ib_marker_log_names *names, ib_marker_log_entry *entries, size_t cap,
                               ib_error *err);

/* The message id of the record `sequence` of `epoch` for `partition` of
 * `durable`, for the stream's duplicate window:
 * "ibml-<durable>-<partition>-<epoch>-<sequence>". Returns false when it
 * does not fit in `cap`. */
bool ib_marker_log_msg_id(char *out, size_t cap, const char *durable, uint32_t partition,
                          uint64_t epoch, uint64_t sequence);

#endif
