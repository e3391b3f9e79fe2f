/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers lookup on a partitioned consumer (ibus markers
 * --partitions N --durable NAME; docs/partitions.md): the event's
 * partition, computed as the producer computed it, and its state in that
 * partition's marker log, replayed read-only into memory. Nothing is
 * written: no record, no lease, no stream. Private to the CLI. */
#ifndef IB_CLI_MARKERS_PARTITION_H
#define IB_CLI_MARKERS_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "jetstream.h"
#include "marker_table.h"

/* The partition among `n` of the event whose normalised id is `id`, or of
 * `partition_key` when the producer named one (ibus publish
 * --partition-key): FNV-1a of the key's bytes mod n, as ibus publish and a
 * server mapping compute it. Pure. */
uint32_t ib_cli_lookup_partition(const char *id, const char *partition_key, uint32_t n);

/* The line lookup prints for state `s` of (`consumer`, `id`) in
 * `partition`, without its newline, into `buf` (cap bytes):
 *   processed: <consumer> <id> in partition <P>
 *   not processed: <consumer> <id> in partition <P>[ in flight] attempts=<N>
 * "in flight": a call was claimed and neither released nor marked since
 * (one running now, or one whose process died in it). Returns the exit
 * code, 0 marked and 3 not, as the lookup of a marker file. Pure. */
int ib_cli_partition_lookup_line(char *buf, size_t cap, const char *consumer, const char *id,
                                 uint32_t partition, const ib_pair_state *s);

/* What the lookup reads. */
typedef struct ib_cli_partition_lookup {
    const char *durable;       /* the consumer's durable (ibus run --durable) */
    uint32_t partitions;       /* ibus run --partitions */
    const char *consumer;      /* the identity, <durable>/<plugin>/<handler> */
    const char *id;            /* normalised */
    const char *partition_key; /* NULL: the id is the key */
} ib_cli_partition_lookup;

/* Replays the event's partition of `durable`'s marker log on `nc`
 * (BORROWED) and prints the line above to stdout; a note on stderr when
 * no record of the partition names the consumer. Returns the exit code:
 * 0 marked, 3 not, 2 when the log does not exist or was made for
 * another N, 1 when it cannot be read (said on stderr). */
int ib_cli_markers_partition_lookup(natsConnection *nc, const ib_cli_partition_lookup *q);

#endif
