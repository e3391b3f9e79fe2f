/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: a durable at a glance, from the outside (cmd_status.c reads
 * it with status_read.c, judges it with status_check.c and prints it with
 * status_print.c). Private to the CLI.
 *
 * A report holds what the server says of the stream, the consumer and the
 * dead-letter stream, what the recorder says of the durable's consumer
 * identities, and the settings the ibus run processes are given (the same
 * options and IB_* variables as ibus run); for a partitioned consumer
 * (--partitions) its partitions and live members stand in for the
 * consumer, the markers and the dead letters (status_partitions*.c).
 * The checks turn it into a list of findings, each with a code, a
 * sentence and the option that fixes it; an empty list is a healthy
 * durable. */
#ifndef IB_CLI_STATUS_H
#define IB_CLI_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dead_letter.h"
#include "jetstream.h"
#include "recorder.h"

#define IB_STATUS_NAME_MAX 256
#define IB_STATUS_FINDINGS_MAX 24

/* The replicas of a clustered stream or consumer. */
typedef struct ib_status_replicas {
    int total;                       /* replicas, the leader included; 0 = not clustered */
    int current;                     /* of them, the leader and those current and online */
    char leader[IB_STATUS_NAME_MAX]; /* "" when none is elected */
    char behind[IB_STATUS_NAME_MAX]; /* names of those not current or offline, ", "-joined */
} ib_status_replicas;

typedef struct ib_status_stream {
    char name[IB_STATUS_NAME_MAX];
    bool exists;
    uint64_t messages, bytes, first_seq, last_seq;
    int64_t first_ms, last_ms; /* times of the first and last message, unix ms; 0 = none */
    int64_t max_age_ms;        /* 0 = none */
    ib_status_replicas replicas;
} ib_status_stream;

typedef struct ib_status_consumer {
    char durable[IB_STATUS_NAME_MAX];
    bool exists;
    bool pull;         /* no deliver subject: ibus run can bind it */
    bool explicit_ack; /* AckExplicit, which ibus run needs */
    char filter[IB_STATUS_NAME_MAX];
    uint64_t pending;       /* NumPending: not delivered yet */
    int64_t ack_pending;    /* delivered, not acked (redeliveries waiting included) */
    int64_t redelivered;    /* of those, delivered more than once */
    int64_t waiting;        /* pull requests waiting on the server: live pullers */
    uint64_t delivered_seq; /* stream sequence of the last delivery; 0 = none */
    int64_t delivered_ms;   /* when, unix ms; 0 = never or unknown */
    uint64_t ack_floor_seq; /* every message up to it is acked */
    int64_t ack_floor_ms;   /* when the floor last moved, unix ms; 0 = unknown */
    int64_t ack_wait_ms;
    int64_t max_deliver; /* <= 0 = unlimited */
    int64_t max_ack_pending;
    int64_t backoff_max_ms;
    ib_status_replicas replicas;
} ib_status_consumer;

/* The dead letters of one durable. */
typedef struct ib_status_dlq {
    char subject[IB_STATUS_NAME_MAX + 16]; /* where ibus run dead-letters */
    char stream[IB_STATUS_NAME_MAX];       /* the stream that captures it; "" = none does */
    uint64_t stream_messages;              /* everything in that stream */
    uint64_t count;                        /* this durable's (Ibus-Consumer), as far as read */
    uint64_t by_reason[IB_DLQ_REASON_COUNT];
    int64_t oldest_ms; /* the oldest of them; 0 = none */
    bool complete;     /* every message was read (else --dlq-scan cut the count) */
    char error[512];   /* "" unless it could not be read */
    ib_status_replicas replicas;
} ib_status_dlq;

/* The markers of the durable's consumer identities. */
typedef struct ib_status_markers {
    char recorder[IB_STATUS_NAME_MAX]; /* its URI without parameters (no secrets) */
    const char *kind;                  /* "memory", "sqlite", "kv"; NULL = not opened */
    bool visible;                      /* read; false for memory: (in the processes) */
    char error[512];                   /* why they could not be read; "" = none */
    ib__consumer_summary *v;           /* OWNED: this durable's identities */
    size_t n;
    bool host_local;           /* holders of another boot are gone (sqlite, memory) */
    ib_status_replicas bucket; /* kv: the bucket's stream */
} ib_status_markers;

/* What the ibus run processes are given. */
typedef struct ib_status_expect {
    int64_t ack_wait_ms;
    int64_t max_deliver;
    /* the retention they prune with (ib_host_retention_effective_ms): with
     * --retention auto, what it follows; 0 = markers kept for ever */
    int64_t retention_ms;
    int64_t retry_max_ms;
    bool retention_auto; /* --retention auto (the default) */
} ib_status_expect;

/* One partition of a partitioned consumer (ibus run --partitions N). */
typedef struct ib_status_partition {
    /* its lease, the newest epoch in the bucket (partition_lease.h) */
    bool lease_bad;  /* the newest epoch is not a lease (another tool's) */
    uint64_t epoch;  /* 0: never leased */
    char owner[129]; /* the holder's member token; "" when none holds it */
    int64_t end_ms;  /* when the lease ends, unix ms; 0: never leased or given back */
    bool owner_live; /* the holder is among the live members */
    /* its durable "<durable>_p<P>" */
    bool durable_exists; /* made when the partition was first taken */
    char filter[IB_STATUS_NAME_MAX];
    uint64_t pending;    /* NumPending */
    int64_t ack_pending; /* NumAckPending */
} ib_status_partition;

/* A partitioned consumer: its partitions and its live members. */
typedef struct ib_status_partitions {
    char durable[IB_STATUS_NAME_MAX];
    char subject[IB_STATUS_NAME_MAX]; /* the base (--subject); "" when not given */
    uint32_t n;                       /* --partitions */
    int64_t lease_ms;                 /* --partition-lease: members live within it */
    char bucket[300];                 /* leases and members */
    char log_stream[300];             /* the marker log */
    bool bucket_exists;               /* false: no process ever ran */
    ib_status_partition *v;           /* OWNED, n of them */
    char (*members)[129];             /* OWNED: the live members' tokens */
    size_t nmembers;
    size_t members_stale;   /* announcements older than the lease */
    size_t members_foreign; /* values that are not announcements */
    char error[512];        /* "" unless the members or a lease could not be read */
} ib_status_partitions;

/* The owner a report shows for partition `p`: its holder while its lease
 * runs at `now_ms`, else NULL (never leased, given back, ended, or a
 * value that is not a lease). */
const char *ib_status_partition_owner(const ib_status_partition *p, int64_t now_ms);

/* The lag of a partition: what its durable has not had acked yet,
 * pending + ack pending. */
uint64_t ib_status_partition_lag(const ib_status_partition *p);

/* The partition a consumer named `name` is the durable of, among `n`
 * partitions of `durable` ("<durable>_p<P>", P decimal without a leading
 * zero and below n), or -1 when it is none of them. */
int64_t ib_status_partition_of_durable(const char *name, const char *durable, uint32_t n);

/* Frees what `p` owns (not `p`); a zeroed one is a no-op. */
void ib_status_partitions_free(ib_status_partitions *p);

/* One thing that needs attention. */
typedef struct ib_status_finding {
    const char *code; /* stable, for scripts: see status_check.c */
    char message[640];
    char fix[160]; /* the option (and value) that fixes it; "" = none */
} ib_status_finding;

typedef struct ib_status_report {
    int64_t now_ms;
    ib_status_stream stream;
    ib_status_consumer consumer;
    ib_status_dlq dlq;
    ib_status_markers markers; /* BORROWED summaries in --all (see cmd_status.c) */
    ib_status_expect expect;
    /* BORROWED: a partitioned consumer's (--partitions); NULL otherwise,
     * and then `consumer`, `markers` and `dlq` are not read */
    const ib_status_partitions *parts;
    ib_status_finding findings[IB_STATUS_FINDINGS_MAX];
    size_t nfindings;
} ib_status_report;

/* ---- reading (status_read.c) ---------------------------------------------- */

/* Fills `s` from the server; a stream that does not exist is an answer
 * (exists false). Returns 0, or -1 with the reason in `why`. */
int ib_status_read_stream(ib_status_stream *s, jsCtx *js, const char *name, char *why, size_t cap);

/* Fills `c` from consumer info `ci` (one of js_Consumers' too). */
void ib_status_consumer_from(ib_status_consumer *c, const jsConsumerInfo *ci);

/* Fills `c` from the server; one that does not exist is an answer. 0 or -1. */
int ib_status_read_consumer(ib_status_consumer *c, jsCtx *js, const char *stream,
                            const char *durable, char *why, size_t cap);

/* Finds the stream capturing d->subject and counts the dead letters of
 * `durable` in it, reading at most `scan` of them. Failures land in
 * d->error. */
void ib_status_read_dlq(ib_status_dlq *d, natsConnection *nc, const char *api_prefix, jsCtx *js,
                        const char *durable, uint64_t scan);

/* The summaries among `all` (n) that belong to `durable`: its
 * "<durable>/..." identities and those `overrides` ("plugin/handler=ID",
 * NULL-terminated, may be NULL) name. Copies them into m->v. Returns 0, or
 * -1 when out of memory. */
int ib_status_markers_pick(ib_status_markers *m, const ib__consumer_summary *all, size_t n,
                           const char *durable, const char *const *overrides);

/* Fills p->v, p->members and p->bucket_exists from the server: the
 * lease of each partition, the live members, the durable of each
 * partition. p->durable, subject, n and lease_ms are set by the caller.
 * Failures land in p->error. Returns 0, or -1 when out of memory. */
int ib_status_read_partitions(ib_status_partitions *p, jsCtx *js, const char *stream,
                              int64_t now_ms);

/* ---- judging (status_check.c) --------------------------------------------- */

/* Appends to r->findings everything that needs attention in `r`. Pure:
 * reads the report and r->now_ms only (and /proc, through the owner
 * tokens, to tell whether a claim's holder on this host still runs). */
void ib_status_check(ib_status_report *r);

/* Appends a finding to `r` (dropped when r holds IB_STATUS_FINDINGS_MAX):
 * its code (static text), how to fix it (copied; NULL: none) and its
 * message, formatted. For the checks of status_check.c and
 * status_partitions.c. */
void ib_status_finding_add(ib_status_report *r, const char *code, const char *fix, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));

/* A partitioned consumer's findings (status_partitions.c), appended to
 * r->findings: partitions with lag and no live owner, leases that are
 * not leases, durables that were never made, members or leases that
 * cannot be read. ib_status_check calls it when r->parts is set. */
void ib_status_check_partitions(ib_status_report *r);

/* ---- printing (status_print.c) -------------------------------------------- */

/* The report in one screen of text. */
void ib_status_print_text(FILE *out, const ib_status_report *r);

/* The report as one JSON object (jansson), or NULL when out of memory;
 * the caller json_decref()s it. */
struct json_t;
struct json_t *ib_status_json(const ib_status_report *r);

/* A partitioned consumer's report (status_partitions_print.c): its text,
 * and its JSON object (NULL when out of memory). */
void ib_status_print_partitions_text(FILE *out, const ib_status_report *r);
struct json_t *ib_status_partitions_json(const ib_status_report *r);

/* An age for people (status_age.c): "850ms", "42s", "5m10s", "3h20m", "2d4h"; at most two
 * units, the larger first. Returns buf. */
const char *ib_status_age(char *buf, size_t cap, int64_t ms);

#endif
