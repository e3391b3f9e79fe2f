/* SPDX-License-Identifier: Apache-2.0 */
/* A partition's markers in memory, as its marker log's records add them
 * up (marker_log.h, "THE MEMORY"): for each (consumer, id) the attempts
 * counted, the fingerprint, and whether it is marked. The partition's
 * owner answers every claim and every duplicate from it.
 *
 * One thread uses a table (the owner's batch thread); it takes no lock.
 * A slot is 32 bytes and the table is kept between three-eighths and
 * three-quarters full, so a pair costs 43 to 85 bytes, plus the
 * consumers' names once each. */
#ifndef IB_MARKER_TABLE_H
#define IB_MARKER_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "marker_log.h"

typedef struct ib_marker_table ib_marker_table;

/* What the table knows of one pair. */
typedef struct ib_pair_state {
    bool known;           /* a record named it (else the rest is 0) */
    bool marked;          /* a DONE record named it */
    bool in_flight;       /* claimed, and neither released nor marked since: a call
                             that may have started and never came back */
    uint32_t attempts;    /* COUNTED records since the last ENDED, while not marked */
    uint64_t fingerprint; /* of its mark, or of its first attempt */
} ib_pair_state;

/* An empty table; freed with ib_marker_table_free (NULL: no-op).
 * Errors: IB_ERR_NOMEM. */
ib_status ib_marker_table_create(ib_marker_table **out, ib_error *err);
void ib_marker_table_free(ib_marker_table *t);

/* Applies one record (decoded, so valid), in the order the log holds
 * them. Errors: IB_ERR_NOMEM, with the table as it was before the record
 * (a record applies whole or not at all), or IB_ERR_INVALID_ARG when the
 * table would name more than 65,535 consumers. */
ib_status ib_marker_table_apply(ib_marker_table *t, const ib_marker_log_record *rec, ib_error *err);

/* What the table knows of (`consumer`, the packed `id`). */
ib_pair_state ib_marker_table_lookup(const ib_marker_table *t, const char *consumer,
                                     const uint8_t id[16]);

/* Whether a record applied to `t` named `consumer` at all: a lookup of
 * an identity the table does not know answers "not known" for every id. */
bool ib_marker_table_knows(const ib_marker_table *t, const char *consumer);

/* Pairs known (and marked), records applied, records applied whose epoch was lower
 * than one applied before them (written by an owner that had lost its
 * lease), and the highest epoch applied. */
typedef struct ib_marker_table_stats {
    size_t pairs;
    size_t marked; /* among them, those marked */
    uint64_t records;
    uint64_t stale_records;
    uint64_t epoch;
} ib_marker_table_stats;

ib_marker_table_stats ib_marker_table_stats_get(const ib_marker_table *t);

#endif
