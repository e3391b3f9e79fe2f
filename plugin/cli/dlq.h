/* SPDX-License-Identifier: Apache-2.0 */
/* ibus dlq: the dead-letter stream as the subcommand reads, filters,
 * prints, replays and purges it (cmd_dlq.c, dlq_read.c, dlq_print.c,
 * dlq_replay.c). Private to the CLI. */
#ifndef IB_CLI_DLQ_H
#define IB_CLI_DLQ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "jetstream.h"

/* Longest stream name the command takes. */
#define IB_DLQ_STREAM_MAX 256

/* Longest event id a listing shows of one that is not a valid id (an
 * invalid-id dead letter), escaped. */
#define IB_DLQ_ID_SHOWN 64

/* One dead letter, read from the stream. Strings are BORROWED from `msg`
 * (its headers) or from the entry's own buffers, and NULL when absent.
 * `event_id` and `event_type` come from the Ibus-Event-* headers, or,
 * when those are absent (an invalid-id dead letter, whose event has no
 * valid id to name), from the message's own bytes whenever they are an
 * Event: the id normalised, or escaped as it is when it is not a valid id
 * (printable ASCII kept, other bytes as \xNN, cut at IB_DLQ_ID_SHOWN), and
 * the type escaped the same way.
 *
 * Headers are input: anyone allowed to publish to the dead-letter subject
 * can write any of them. A value holding a control byte is not taken (the
 * field stays NULL, so nothing prints it to a terminal), a number that is
 * not one reads as 0, and `invalid` says which header was refused, first
 * one first ("" when none): a replay skips such a dead letter. An
 * Ibus-Handler longer than IB_CONSUMER_MAX or holding anything but
 * printable ASCII (no space) is refused the same way. */
typedef struct ib_dlq_entry {
    natsMsg *msg;    /* OWNED; ib_dlq_entry_clear destroys it */
    uint64_t seq;    /* its sequence in the dead-letter stream */
    int64_t time_ms; /* when the dead letter was stored, unix ms */
    const char *reason, *error, *subject, *stream, *consumer, *event_id, *event_type;
    uint64_t stream_seq;            /* the original's, in its own stream */
    uint64_t deliveries;            /* Ibus-Delivery-Count */
    char invalid[96];               /* why a header was refused; "" = none */
    const char *trace_id, *span_id; /* Ibus-Trace-Id, Ibus-Span-Id: the trace it continued */
    const char *handler;            /* Ibus-Handler: the consumer identity whose verdict it was */
    char id_buf[IB_DLQ_ID_SHOWN * 4 + 1];
    char type_buf[256];
} ib_dlq_entry;

/* Fills `e` from `m`, taking `m` over (ib_dlq_entry_clear destroys it),
 * with the checks above. For the walk and for tests and fuzzing. */
void ib_dlq_entry_read(ib_dlq_entry *e, natsMsg *m);

/* Fills e->event_id and e->event_type, where the headers gave none, from
 * `len` bytes of message data that are an Event (see ib_dlq_entry); leaves
 * them NULL otherwise. Pure; exposed for tests. */
void ib_dlq_entry_from_data(ib_dlq_entry *e, const uint8_t *data, size_t len);

/* What selects dead letters; NULL / 0 = any. */
typedef struct ib_dlq_filter {
    const char *reason; /* a reason name (checked by ib_dlq_filter_check) */
    const char *consumer;
    const char *type;
    char id[40];      /* normalised, "" = any */
    int64_t since_ms; /* stored at or after; 0 = any */
    int64_t until_ms; /* stored before; 0 = any */
} ib_dlq_filter;

/* Checks the filter's reason and id, normalising the id into f->id from
 * `id_text` (may be NULL). 0, or -1 after printing why to stderr (usage:
 * exit 2). */
int ib_dlq_filter_check(ib_dlq_filter *f, const char *id_text);

/* Parses --since / --until: an RFC 3339 UTC time (2026-12-01T21:30:00Z,
 * seconds and the Z optional) or a duration meaning that long ago. 0 or
 * -1. */
int ib_dlq_parse_time(int64_t *out_ms, const char *text, int64_t now_ms);

/* Whether `e` passes `f`. */
bool ib_dlq_filter_match(const ib_dlq_filter *f, const ib_dlq_entry *e);

/* Called for each dead letter that passes the filter, in stream order.
 * Return non-zero to stop. The entry is BORROWED for the call. */
typedef int (*ib_dlq_visit_fn)(void *ctx, ib_dlq_entry *e);

/* Walks the dead letters of `stream` from its first sequence to its last
 * (read one by one through the stream: no consumer is created), calling
 * `visit` for those that pass `f`. Returns 0, 1 for a runtime failure or 2
 * when the stream does not exist, after printing why (naming --stream /
 * --durable). `*visited` counts the calls. */
int ib_dlq_walk(jsCtx *js, const char *stream, const ib_dlq_filter *f, ib_dlq_visit_fn visit,
                void *ctx, uint64_t *visited);

/* Reads dead letter `seq` of `stream` into `e`. 0, 1 (runtime failure), 2
 * (no such stream), or 3 (no such message), after printing why. */
int ib_dlq_read_one(ib_dlq_entry *e, jsCtx *js, const char *stream, uint64_t seq);

void ib_dlq_entry_clear(ib_dlq_entry *e);

/* Writes the entry's time as 2026-12-01T21:30:00.123Z into buf. */
char *ib_dlq_format_time(char *buf, size_t cap, int64_t ms);

/* Output of list (and of replay --dry-run): a table header, a row, or one
 * JSON object per line (`json`). */
void ib_dlq_print_header(FILE *out);
void ib_dlq_print_row(FILE *out, const ib_dlq_entry *e);
int ib_dlq_print_json(FILE *out, const ib_dlq_entry *e);

/* ibus dlq show: every header, then the decoded event with its payload as
 * text when it is valid UTF-8, else hex. */
void ib_dlq_print_show(FILE *out, const ib_dlq_entry *e);

/* Where a dead letter may be replayed (dlq_target.c). A dead letter names
 * its target itself (Ibus-Subject) and the stream that target must belong
 * to (Ibus-Stream); both are input. A replay publishes only when the
 * subject is a plain subject (no wildcard, space or control byte), not a
 * $ subject (the server's API: $JS.API.STREAM.PURGE.<stream> would purge
 * it) nor an _INBOX one (replies other clients wait for), and when the
 * stream JetStream names as capturing it is the one the dead letter
 * names. --force changes none of this. */

/* The checks that need no server: 0, or -1 with why in `why` (cap bytes,
 * a phrase: "the target is a $ subject (...)"; the caller shows the
 * target beside it). */
int ib_dlq_target_precheck(const ib_dlq_entry *e, char *why, size_t cap);

/* The stream capturing each subject asked about, remembered for the
 * run. */
typedef struct ib_dlq_targets ib_dlq_targets;

/* `api_prefix` (BORROWED, for the targets' life): the JetStream API
 * prefix of `nc`'s context (ib_nats_api_prefix). */
ib_dlq_targets *ib_dlq_targets_create(natsConnection *nc, const char *api_prefix,
                                      int64_t timeout_ms);
void ib_dlq_targets_free(ib_dlq_targets *t);

/* Outcome of ib_dlq_target_check. */
typedef enum ib_dlq_target {
    IB_DLQ_TARGET_OK = 0,   /* replay it */
    IB_DLQ_TARGET_SKIP = 1, /* do not: `why` says why */
    IB_DLQ_TARGET_FAIL = 2, /* JetStream could not be asked: `why` says why */
} ib_dlq_target;

/* The precheck, then asks JetStream (<api prefix>.STREAM.NAMES, filtered by the
 * subject) which stream captures the subject, and compares it with
 * Ibus-Stream. */
ib_dlq_target ib_dlq_target_check(ib_dlq_targets *t, const ib_dlq_entry *e, char *why, size_t cap);

/* What replay does beyond the filter. */
typedef struct ib_dlq_replay_opts {
    natsConnection *nc;     /* for the JetStream API requests of the target checks */
    const char *api_prefix; /* ... under this prefix (ib_nats_api_prefix) */
    const char *stream;     /* the dead-letter stream */
    bool dry_run;
    bool purge; /* delete each dead letter once its replay is acked */
    bool force; /* replay conflict dead letters too */
    bool json;
    double rate;        /* at most this many per second; 0 = no limit */
    int64_t timeout_ms; /* how long to wait for each JetStream ack */
} ib_dlq_replay_opts;

/* ibus dlq replay: see cmd_dlq.c. Returns the exit code. */
int ib_dlq_replay(jsCtx *js, const ib_dlq_filter *f, const ib_dlq_replay_opts *o);

/* ibus dlq purge: deletes every dead letter that passes `f`, printing the
 * count. Returns the exit code. */
int ib_dlq_purge(jsCtx *js, const char *stream, const ib_dlq_filter *f);

/* The Nats-Msg-Id a replay of dead letter `seq` of `stream` carries. */
char *ib_dlq_replay_msg_id(char *buf, size_t cap, const char *stream, uint64_t seq);

#endif
