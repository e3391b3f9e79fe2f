/* SPDX-License-Identifier: Apache-2.0 */
/* bench_marker_memory: appends a partitioned consumer's marker log
 * (recorders/include/marker_log.h, marker_stream.h) and nothing else, so
 * the nats-server's memory per marker can be measured on its own
 * (bench/marker_memory.py drives it; issue 47).
 *
 *   bench_marker_memory --url URL --markers N [--partitions P]
 *                       [--per-record E] [--durable NAME] [--first K]
 *                       [--epoch X] [--replay]
 *
 * Opens (makes if missing) the log "IBUS_MARKERS_<durable>" on
 * "ibus.markers.<durable>.<P>" as ibus run does, with P partitions, and
 * writes N markers as the consumer's batches do: a batch of E ids (the
 * last one may be shorter), all for one partition (batch b goes to
 * partition b mod P), appends a CLAIMED record of its E entries and then
 * a DONE record of the same entries, each with its own
 * ib_marker_stream_append_all call, as the log recorder writes them
 * before and after the handlers run. A marker therefore costs two
 * entries, one in each record. The ids are distinct: the markers K to
 * K + N - 1 of a counter, each made uuid4-shaped (version and variant
 * bits set) from a hash of its number, so runs with different --first
 * add new markers to the same log; --epoch names the writer's lease
 * epoch in the records' message ids (use a new one per run on one log).
 * One consumer name per record, as with one handler.
 *
 * With --markers 0 it only opens the log. With --replay it then reads
 * every partition back as a new owner does (ib_marker_stream_replay into
 * a table, one partition at a time), so the server's memory after the
 * owners' start can be read. It prints one line, "records=R markers=N
 * payload_bytes=B ms=T stream_msgs=M stream_bytes=S" and, with --replay,
 * " replayed_records=R2 replayed_marked=N2 replay_ms=T2": what it
 * appended (R records of B bytes in all, in T ms), the stream's state
 * afterwards (every run's records) and what the replay read (records,
 * and the markers they add up to). Exit status 0, 1 on a failure
 * (message on stderr), 2 on bad options. */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker_stream.h"
#include "marker_table.h"
#include "uuid.h"

#define CONSUMER "bench/noop/noop"

typedef struct mm_args {
    const char *url, *durable;
    uint64_t markers, first, epoch;
    uint32_t partitions, per_record;
    bool replay;
} mm_args;

/* What one run appended. */
typedef struct mm_counts {
    uint64_t records, markers, payload_bytes;
} mm_counts;

static int usage(void)
{
    fprintf(stderr, "usage: bench_marker_memory --url URL --markers N [--partitions P] "
                    "[--per-record E] [--durable NAME] [--first K] [--epoch X] [--replay]\n");
    return 2;
}

static int parse_args(mm_args *a, int argc, char **argv)
{
    *a = (mm_args){.durable = "bench", .epoch = 1, .partitions = 8, .per_record = 64};
    bool have_markers = false;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--replay") == 0) {
            a->replay = true;
            i--;
            continue;
        }
        if (v == NULL)
            return -1;
        if (strcmp(k, "--url") == 0)
            a->url = v;
        else if (strcmp(k, "--durable") == 0)
            a->durable = v;
        else if (strcmp(k, "--markers") == 0)
            a->markers = strtoull(v, NULL, 10), have_markers = true;
        else if (strcmp(k, "--first") == 0)
            a->first = strtoull(v, NULL, 10);
        else if (strcmp(k, "--epoch") == 0)
            a->epoch = strtoull(v, NULL, 10);
        else if (strcmp(k, "--partitions") == 0)
            a->partitions = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(k, "--per-record") == 0)
            a->per_record = (uint32_t)strtoul(v, NULL, 10);
        else
            return -1;
    }
    if (a->url == NULL || !have_markers || a->epoch == 0 || a->partitions < 1 ||
        a->per_record < 1 || a->per_record > IB_MARKER_LOG_ENTRIES_MAX)
        return -1;
    return 0;
}

/* splitmix64: spreads a counter over 64 bits, so ids look random. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Marker number n as a packed uuid4-shaped id. */
static bool id_of(uint8_t out[16], uint64_t n)
{
    uint64_t hi = (mix(2 * n) & ~0xf000ull) | 0x4000ull;
    uint64_t lo = (mix(2 * n + 1) & ~(0x3ull << 62)) | (0x2ull << 62);
    char hex[IB_ID_BUF_SIZE];
    snprintf(hex, sizeof(hex), "%016" PRIx64 "%016" PRIx64, hi, lo);
    return ib_id_pack(out, hex);
}

/* Appends one batch, markers [first, first + n), to `partition`: its
 * CLAIMED record, then its DONE record. */
static ib_status append_batch(ib_marker_stream *s, const mm_args *a, uint32_t partition,
                              uint64_t *sequence, uint64_t first, uint32_t n,
                              ib_marker_log_entry *entries, mm_counts *c, ib_error *err)
{
    static const char *const names[] = {CONSUMER};
    for (uint32_t i = 0; i < n; i++) {
        entries[i].consumer = 0;
        entries[i].fingerprint = mix(~(first + i)) | 1; /* never 0: an event was seen */
        if (!id_of(entries[i].id, first + i))
            return ib_error_set(err, IB_ERR_INVALID_ARG, "id %" PRIu64 " does not pack", first + i);
    }
    const ib_marker_log_kind kinds[] = {IB_MARKER_LOG_CLAIMED, IB_MARKER_LOG_DONE};
    for (size_t k = 0; k < 2; k++) {
        ib_marker_log_record rec = {.kind = kinds[k],
                                    .partition = partition,
                                    .epoch = a->epoch,
                                    .sequence = ++*sequence,
                                    .names = names,
                                    .nnames = 1,
                                    .entries = entries,
                                    .nentries = n};
        ib_status st = ib_marker_stream_append_all(s, &rec, 1, err);
        if (st != IB_OK)
            return st;
        c->records++;
        c->payload_bytes += ib_marker_log_size(&rec);
    }
    c->markers += n;
    return IB_OK;
}

/* Every batch of the run, partition by partition in turn. */
static ib_status append_markers(ib_marker_stream *s, const mm_args *a, mm_counts *c, ib_error *err)
{
    uint64_t *sequences = calloc(a->partitions, sizeof(*sequences));
    ib_marker_log_entry *entries = calloc(a->per_record, sizeof(*entries));
    ib_status st = IB_OK;
    if (sequences == NULL || entries == NULL)
        st = ib_error_set(err, IB_ERR_NOMEM, "out of memory");
    for (uint64_t done = 0, b = 0; st == IB_OK && done < a->markers; b++) {
        uint64_t left = a->markers - done;
        uint32_t n = left < a->per_record ? (uint32_t)left : a->per_record;
        uint32_t p = (uint32_t)(b % a->partitions);
        st = append_batch(s, a, p, &sequences[p], a->first + done, n, entries, c, err);
        done += n;
    }
    free(entries);
    free(sequences);
    return st;
}

/* Every partition read back into a table of its own, as its owner
 * does at start; the records and marked pairs of them all. */
static ib_status replay_all(ib_marker_stream *s, const mm_args *a, uint64_t *records,
                            uint64_t *marked, ib_error *err)
{
    ib_status st = IB_OK;
    *records = *marked = 0;
    for (uint32_t p = 0; st == IB_OK && p < a->partitions; p++) {
        ib_marker_table *t = NULL;
        uint64_t n = 0;
        st = ib_marker_table_create(&t, err);
        if (st == IB_OK)
            st = ib_marker_stream_replay(s, p, t, &n, err);
        if (st == IB_OK) {
            *records += n;
            *marked += ib_marker_table_stats_get(t).marked;
        }
        ib_marker_table_free(t);
    }
    return st;
}

/* The log stream's messages and bytes. */
static ib_status stream_state(jsCtx *js, const char *stream, uint64_t *msgs, uint64_t *bytes,
                              ib_error *err)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "stream info of %s: %s (JetStream error %d)", stream,
                            natsStatus_GetText(st), (int)jerr);
    *msgs = si->State.Msgs;
    *bytes = si->State.Bytes;
    jsStreamInfo_Destroy(si);
    return IB_OK;
}

/* Opens the log, appends, reads its state and prints the line. */
static ib_status run(const mm_args *a, ib_error *err)
{
    char stream[300], base[300];
    snprintf(stream, sizeof(stream), "IBUS_MARKERS_%s", a->durable);
    snprintf(base, sizeof(base), "ibus.markers.%s", a->durable);
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    ib_marker_stream *s = NULL;
    mm_counts c = {0};
    uint64_t msgs = 0, bytes = 0;
    ib_marker_stream_options o = {
        .stream = stream, .subject_base = base, .durable = a->durable, .partitions = a->partitions};
    ib_status st = ib__bench_connect(&nc, &js, a->url, err);
    if (st == IB_OK)
        st = ib_marker_stream_open(&s, nc, &o, err);
    int64_t t0 = ib__bench_now_ms();
    if (st == IB_OK)
        st = append_markers(s, a, &c, err);
    int64_t ms = ib__bench_now_ms() - t0;
    if (st == IB_OK)
        st = stream_state(js, stream, &msgs, &bytes, err);
    bool printed = st == IB_OK;
    if (printed)
        printf("records=%" PRIu64 " markers=%" PRIu64 " payload_bytes=%" PRIu64 " ms=%" PRId64
               " stream_msgs=%" PRIu64 " stream_bytes=%" PRIu64,
               c.records, c.markers, c.payload_bytes, ms, msgs, bytes);
    if (st == IB_OK && a->replay) {
        uint64_t records = 0, marked = 0;
        t0 = ib__bench_now_ms();
        st = replay_all(s, a, &records, &marked, err);
        if (st == IB_OK)
            printf(" replayed_records=%" PRIu64 " replayed_marked=%" PRIu64 " replay_ms=%" PRId64,
                   records, marked, ib__bench_now_ms() - t0);
    }
    if (printed)
        printf("\n");
    ib_marker_stream_close(s);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

int main(int argc, char **argv)
{
    mm_args a;
    ib_error e = {0};
    if (parse_args(&a, argc, argv) != 0)
        return usage();
    if (run(&a, &e) != IB_OK) {
        fprintf(stderr, "bench_marker_memory: %s\n", e.msg);
        return 1;
    }
    return 0;
}
