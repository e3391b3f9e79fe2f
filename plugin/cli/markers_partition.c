/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers lookup on a partitioned consumer (markers_partition.h). */
#include "markers_partition.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "host.h"
#include "marker_stream.h"
#include "partition.h"
#include "uuid.h"

uint32_t ib_cli_lookup_partition(const char *id, const char *partition_key, uint32_t n)
{
    /* the key ib_bus_event_msg puts in the subject: the partition key, or
     * the normalised id */
    const char *key = partition_key != NULL ? partition_key : id;
    return ib_partition_of(ib_partition_hash(key, strlen(key)), n);
}

int ib_cli_partition_lookup_line(char *buf, size_t cap, const char *consumer, const char *id,
                                 uint32_t partition, const ib_pair_state *s)
{
    if (s->marked) {
        snprintf(buf, cap, "processed: %s %s in partition %" PRIu32, consumer, id, partition);
        return 0;
    }
    snprintf(buf, cap, "not processed: %s %s in partition %" PRIu32 "%s attempts=%" PRIu32,
             consumer, id, partition, s->in_flight ? " in flight" : "", s->attempts);
    return 3;
}

/* Replays `partition` of the log into *t. Returns 0, or the exit code
 * after saying why. */
static int replay(ib_marker_table **t, natsConnection *nc, const ib_cli_partition_lookup *q,
                  uint32_t partition)
{
    ib_host_partition_names names;
    ib_host_partition_names_make(&names, q->durable);
    ib_marker_stream_options o = {
        .stream = names.log_stream,
        .subject_base = names.log_base,
        .durable = q->durable,
        .partitions = q->partitions,
        .must_exist = true, /* a reader makes nothing */
    };
    ib_marker_stream *log = NULL;
    ib_error e = {0};
    ib_status st = ib_marker_stream_open(&log, nc, &o, &e);
    if (st == IB_OK && (st = ib_marker_table_create(t, &e)) == IB_OK)
        st = ib_marker_stream_replay(log, partition, *t, NULL, &e);
    ib_marker_stream_close(log);
    if (st == IB_OK)
        return 0;
    fprintf(stderr, "ibus markers lookup: %s\n", e.msg);
    return st == IB_ERR_CONFIG ? 2 : 1;
}

int ib_cli_markers_partition_lookup(natsConnection *nc, const ib_cli_partition_lookup *q)
{
    uint8_t packed[16];
    char line[1024];
    uint32_t p = ib_cli_lookup_partition(q->id, q->partition_key, q->partitions);
    ib_marker_table *t = NULL;
    int code = replay(&t, nc, q, p);
    if (code != 0 || !ib_id_pack(packed, q->id)) {
        ib_marker_table_free(t);
        return code != 0 ? code : 2;
    }
    ib_pair_state s = ib_marker_table_lookup(t, q->consumer, packed);
    code = ib_cli_partition_lookup_line(line, sizeof(line), q->consumer, q->id, p, &s);
    printf("%s\n", line);
    if (!ib_marker_table_knows(t, q->consumer))
        fprintf(stderr,
                "ibus markers lookup: note: no record of partition %" PRIu32
                " names %s: no event of it was handled in that partition yet, or --consumer is "
                "not one of the identities (<durable>/<plugin>/<handler>)%s\n",
                p, q->consumer,
                q->partition_key == NULL
                    ? "; an event published with --partition-key is found with that key"
                    : "");
    ib_marker_table_free(t);
    return code;
}
