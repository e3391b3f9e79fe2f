/* SPDX-License-Identifier: Apache-2.0 */
/* The fixed metrics registry and its Prometheus text rendering. */
#include "ops.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each hot value sits on its own cache line: handler threads that bump
 * different counters must not bounce one line between cores. */
typedef struct ib_cell_u64 {
    _Alignas(64) _Atomic uint64_t v;
} ib_cell_u64;

typedef struct ib_cell_i64 {
    _Alignas(64) _Atomic int64_t v;
} ib_cell_i64;

/* No separate count: rendering derives it from the buckets, so _count and
 * the +Inf bucket always agree even while observations land mid-scrape. */
typedef struct ib_hist {
    _Alignas(64) _Atomic uint64_t sum_ns;
    _Atomic uint64_t buckets[IB_METRICS_BUCKETS + 1];
} ib_hist;

/* One consumer identity's series. Its runs share a cache line: only the
 * handlers of that one consumer bump them. Registered once, never freed
 * before the registry, so the host may keep a pointer per handler. */
struct ib_metrics_consumer {
    ib_hist hist;
    _Alignas(64) _Atomic uint64_t runs[IB_METRIC_RESULT_COUNT];
    /* Registration appends while a scrape may walk the list: `next` is
     * published with release, read with acquire. */
    _Atomic(ib_metrics_consumer *) next;
    /* HTTP requests its handler reported (ABI 1.3 http_request): rendered
     * only once the first one came, so other consumers show no such series. */
    ib_hist http_hist;
    _Atomic bool http_seen;
    _Atomic uint64_t http_codes[IB_METRICS_HTTP_CODES];
    /* Its circuit and handler timeouts: rare changes, one line for all. */
    _Alignas(64) _Atomic int circuit; /* ib_metrics_circuit */
    _Atomic uint64_t transitions[IB_METRICS_CIRCUIT_COUNT];
    _Atomic uint64_t waits;
    _Atomic uint64_t timeouts;
    char *name;  /* as given, for lookups at registration */
    char *label; /* `consumer="<escaped name>",`: built once, so a scrape only copies it */
};

struct ib_metrics {
    ib_cell_u64 counters[IB_METRIC_COUNTER_COUNT];
    ib_cell_u64 dead[IB_DLQ_REASON_COUNT];
    ib_cell_i64 gauges[IB_METRIC_GAUGE_COUNT];
    ib_hist hist[IB_METRIC_HISTOGRAM_COUNT];
    _Atomic(ib_metrics_consumer *) consumers; /* registration order */
    ib_metrics_consumer *consumers_tail;      /* registering thread only */
    char version[64];
    char version_label[2 * 64]; /* version, escaped */
};

static const double bucket_bounds[IB_METRICS_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

/* The le label values, spelled once so rendering never depends on printf's
 * float formatting or the locale. */
static const char *const bucket_le[IB_METRICS_BUCKETS + 1] = {
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
    "0.25",   "0.5",   "1",      "2.5",   "5",    "10",    "+Inf"};

/* A series' name and its HELP line. */
typedef struct metric_info {
    const char *name;
    const char *help;
} metric_info;

static const metric_info counter_info[IB_METRIC_COUNTER_COUNT] = {
    [IB_METRIC_EVENTS_RECEIVED] = {"ibus_events_received_total",
                                   "JetStream deliveries fetched from the consumer, decodable or "
                                   "not (other messages are ignored, not counted)."},
    [IB_METRIC_EVENTS_HANDLED] = {"ibus_events_handled_total",
                                  "Handler runs that succeeded and were marked processed."},
    [IB_METRIC_DUPLICATES_DROPPED] = {"ibus_duplicates_dropped_total",
                                      "Handler runs skipped because the event was already marked."},
    [IB_METRIC_HANDLER_FAILURES] = {"ibus_handler_failures_total",
                                    "Handler runs that returned RETRY or REJECT."},
    [IB_METRIC_EVENTS_UNHANDLED] = {"ibus_events_unhandled_total",
                                    "Events acked because no handler subscribes to their type."},
    [IB_METRIC_NAKS] = {"ibus_naks_total", "Messages negatively acknowledged for redelivery."},
    [IB_METRIC_ACKS] = {"ibus_acks_total", "Messages acknowledged."},
    [IB_METRIC_REDELIVERIES] = {"ibus_redeliveries_total",
                                "Messages received with a delivery count above 1."},
    [IB_METRIC_RECORDER_ERRORS] = {"ibus_recorder_errors_total",
                                   "Recorder calls that failed (claims, marks, releases)."},
    [IB_METRIC_CLAIMS_LOST] = {"ibus_claims_lost_total",
                               "Handlers that succeeded after another owner had taken their "
                               "claim over (not marked; the new holder decides)."},
    [IB_METRIC_CONFLICTS] = {"ibus_conflicts_total",
                             "Handlers not run because their event id was marked with another "
                             "payload (a producer reused the id)."},
    [IB_METRIC_MARKERS_PRUNED] = {"ibus_markers_pruned_total",
                                  "Markers removed by background pruning (--retention); "
                                  "rate() of it is the pruning rate."},
    [IB_METRIC_REDELIVERED_DUPLICATES] =
        {"ibus_redelivered_duplicates_total",
         "Handler runs skipped as already marked on a redelivery (delivery count above 1) "
         "whose every handler was marked: the marks were durable but the ack was lost or the "
         "process died before it."},
};

static const metric_info gauge_info[IB_METRIC_GAUGE_COUNT] = {
    [IB_METRIC_HANDLERS_IN_FLIGHT] = {"ibus_handlers_in_flight", "Handler calls running now."},
    [IB_METRIC_CONSUMER_PENDING] = {"ibus_consumer_pending",
                                    "Messages the consumer has not delivered yet, from the last "
                                    "delivery or the server (read every 5 s)."},
    [IB_METRIC_CONNECTED] = {"ibus_connected", "1 while connected to NATS, else 0."},
    [IB_METRIC_CONSUMER_BOUND] = {"ibus_consumer_bound",
                                  "1 while bound to the durable consumer, else 0."},
    [IB_METRIC_RECORDER_UP] = {"ibus_recorder_up",
                               "1 while the recorder's last call worked, else 0."},
    [IB_METRIC_MARKERS] = {"ibus_markers",
                           "Markers in the recorder, as last counted: every 5 s, every 30 s "
                           "when idle, so up to 30 s old (not per scrape: counting walks them "
                           "all)."},
    [IB_METRIC_RECORDER_WAL_BYTES] = {"ibus_recorder_wal_bytes",
                                      "Bytes in the recorder's write-ahead log (sqlite), else 0."},
    [IB_METRIC_OUTBOX_PENDING] = {"ibus_outbox_pending",
                                  "Messages committed to the outbox and not yet published."},
    [IB_METRIC_CONSUMER_ACK_PENDING] = {"ibus_consumer_ack_pending",
                                        "Messages delivered to some process of the consumer and "
                                        "not acked yet, read from the server every 5 s."},
    [IB_METRIC_READY] = {"ibus_ready", "1 exactly when /readyz answers 200, else 0."},
    [IB_METRIC_HANDLERS_OVERDUE] = {"ibus_handlers_overdue",
                                    "Handler calls running past --handler-timeout now (while "
                                    "above 0, /healthz answers 503)."},
    [IB_METRIC_PARTITIONS] = {"ibus_partitions",
                              "Partitions of the partitioned consumer (--partitions); 0 when "
                              "the consumer is not partitioned."},
    [IB_METRIC_PARTITIONS_OWNED] = {"ibus_partitions_owned",
                                    "Partitions this process owns now (holds the lease of and "
                                    "pulls). Summed over the fleet it should equal "
                                    "ibus_partitions: less means a partition has no owner."},
    [IB_METRIC_FLEET_MEMBERS] = {"ibus_fleet_members",
                                 "Live processes of the partitioned consumer, as this process "
                                 "last read them."},
};

/* The to label values of ibus_circuit_transitions_total. */
static const char *const circuit_label[IB_METRICS_CIRCUIT_COUNT] = {
    [IB_METRICS_CIRCUIT_CLOSED] = "closed",
    [IB_METRICS_CIRCUIT_HALF_OPEN] = "half-open",
    [IB_METRICS_CIRCUIT_OPEN] = "open",
};

/* The result label values of ibus_consumer_runs_total. */
static const char *const result_label[IB_METRIC_RESULT_COUNT] = {
    [IB_METRIC_RESULT_HANDLED] = "handled",
    [IB_METRIC_RESULT_DUPLICATE] = "duplicate",
    [IB_METRIC_RESULT_RETRY] = "retry",
    [IB_METRIC_RESULT_REJECTED] = "rejected",
    [IB_METRIC_RESULT_CONFLICT] = "conflict",
    [IB_METRIC_RESULT_CLAIM_LOST] = "claim-lost",
    [IB_METRIC_RESULT_RECORDER_FAILED] = "recorder-failed",
};

static const metric_info hist_info[IB_METRIC_HISTOGRAM_COUNT] = {
    [IB_METRIC_HANDLE_SECONDS] = {"ibus_handle_seconds", "Time spent in one handler call."},
    [IB_METRIC_RECORDER_SECONDS] = {"ibus_recorder_seconds",
                                    "Time spent in the recorder for one batch (its claims, marks "
                                    "and releases together)."},
};

double ib_metrics_bucket_bound(size_t i)
{
    return i < IB_METRICS_BUCKETS ? bucket_bounds[i] : INFINITY;
}

static void hist_init(ib_hist *h)
{
    atomic_init(&h->sum_ns, 0);
    for (size_t i = 0; i <= IB_METRICS_BUCKETS; i++)
        atomic_init(&h->buckets[i], 0);
}

/* Escapes a label value as format 0.0.4 asks (backslash, double quote,
 * newline) into `out`, which holds at least 2 * strlen(s) + 1 bytes.
 * Done once per value, when it is set, so a scrape only copies it. */
static void label_escape(char *out, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n')
            *out++ = '\\';
        *out++ = *s == '\n' ? 'n' : *s;
    }
    *out = '\0';
}

ib_metrics *ib_metrics_create(void)
{
    ib_metrics *m = aligned_alloc(_Alignof(ib_metrics), sizeof(ib_metrics));
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < IB_METRIC_COUNTER_COUNT; i++)
        atomic_init(&m->counters[i].v, 0);
    for (size_t i = 0; i < IB_DLQ_REASON_COUNT; i++)
        atomic_init(&m->dead[i].v, 0);
    for (size_t i = 0; i < IB_METRIC_GAUGE_COUNT; i++)
        atomic_init(&m->gauges[i].v, 0);
    for (size_t h = 0; h < IB_METRIC_HISTOGRAM_COUNT; h++)
        hist_init(&m->hist[h]);
    atomic_init(&m->consumers, NULL);
    m->consumers_tail = NULL;
    ib_metrics_set_version(m, NULL);
    return m;
}

void ib_metrics_free(ib_metrics *m)
{
    if (m == NULL)
        return;
    ib_metrics_consumer *c = atomic_load_explicit(&m->consumers, memory_order_acquire);
    while (c != NULL) {
        ib_metrics_consumer *next = atomic_load_explicit(&c->next, memory_order_acquire);
        free(c->name);
        free(c->label);
        free(c);
        c = next;
    }
    free(m);
}

void ib_metrics_set_version(ib_metrics *m, const char *version)
{
    if (m == NULL)
        return;
    snprintf(m->version, sizeof(m->version), "%s", version != NULL ? version : "unknown");
    label_escape(m->version_label, m->version);
}

void ib_metrics_add(ib_metrics *m, ib_metric_counter which, uint64_t n)
{
    if (m == NULL || (unsigned)which >= IB_METRIC_COUNTER_COUNT)
        return;
    atomic_fetch_add_explicit(&m->counters[which].v, n, memory_order_relaxed);
}

void ib_metrics_dead_letter(ib_metrics *m, ib_dead_letter_reason reason)
{
    if (m == NULL)
        return;
    if ((unsigned)reason >= IB_DLQ_REASON_COUNT)
        reason = IB_DLQ_OTHER;
    atomic_fetch_add_explicit(&m->dead[reason].v, 1, memory_order_relaxed);
}

void ib_metrics_gauge_set(ib_metrics *m, ib_metric_gauge which, int64_t value)
{
    if (m == NULL || (unsigned)which >= IB_METRIC_GAUGE_COUNT)
        return;
    atomic_store_explicit(&m->gauges[which].v, value, memory_order_relaxed);
}

void ib_metrics_gauge_add(ib_metrics *m, ib_metric_gauge which, int64_t delta)
{
    if (m == NULL || (unsigned)which >= IB_METRIC_GAUGE_COUNT)
        return;
    atomic_fetch_add_explicit(&m->gauges[which].v, delta, memory_order_relaxed);
}

static void hist_observe(ib_hist *h, double seconds)
{
    if (!(seconds > 0)) /* also catches NaN */
        seconds = 0;
    if (seconds > 1e6)
        seconds = 1e6;
    size_t b = 0;
    while (b < IB_METRICS_BUCKETS && seconds > bucket_bounds[b])
        b++;
    /* bucket first, then the sum with release: a reader that acquires the
     * sum sees the bucket too, so a scrape never shows time without count */
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)(seconds * 1e9 + 0.5), memory_order_release);
}

void ib_metrics_observe(ib_metrics *m, ib_metric_histogram which, double seconds)
{
    if (m == NULL || (unsigned)which >= IB_METRIC_HISTOGRAM_COUNT)
        return;
    hist_observe(&m->hist[which], seconds);
}

static ib_metrics_consumer *consumer_find(ib_metrics *m, const char *consumer)
{
    ib_metrics_consumer *c = atomic_load_explicit(&m->consumers, memory_order_acquire);
    for (; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        if (strcmp(c->name, consumer) == 0)
            return c;
    return NULL;
}

ib_metrics_consumer *ib_metrics_consumer_add(ib_metrics *m, const char *consumer)
{
    if (m == NULL || consumer == NULL)
        return NULL;
    ib_metrics_consumer *c = consumer_find(m, consumer);
    if (c != NULL)
        return c;
    c = aligned_alloc(_Alignof(ib_metrics_consumer), sizeof(*c));
    if (c == NULL)
        return NULL;
    hist_init(&c->http_hist);
    atomic_init(&c->http_seen, false);
    for (size_t k = 0; k < IB_METRICS_HTTP_CODES; k++)
        atomic_init(&c->http_codes[k], 0);
    hist_init(&c->hist);
    for (size_t r = 0; r < IB_METRIC_RESULT_COUNT; r++)
        atomic_init(&c->runs[r], 0);
    atomic_init(&c->circuit, IB_METRICS_CIRCUIT_CLOSED);
    for (size_t k = 0; k < IB_METRICS_CIRCUIT_COUNT; k++)
        atomic_init(&c->transitions[k], 0);
    atomic_init(&c->waits, 0);
    atomic_init(&c->timeouts, 0);
    atomic_init(&c->next, NULL);
    c->name = strdup(consumer);
    c->label = malloc(2 * strlen(consumer) + sizeof("consumer=\"\","));
    if (c->label != NULL) {
        memcpy(c->label, "consumer=\"", 10);
        label_escape(c->label + 10, consumer);
        strcat(c->label, "\",");
    }
    if (c->name == NULL || c->label == NULL) {
        free(c->name);
        free(c->label);
        free(c);
        return NULL;
    }
    /* release: a scrape that sees the link sees a fully built entry */
    if (m->consumers_tail == NULL)
        atomic_store_explicit(&m->consumers, c, memory_order_release);
    else
        atomic_store_explicit(&m->consumers_tail->next, c, memory_order_release);
    m->consumers_tail = c;
    return c;
}

void ib_metrics_consumer_count(ib_metrics_consumer *c, ib_metric_result result)
{
    if (c == NULL || (unsigned)result >= IB_METRIC_RESULT_COUNT)
        return;
    atomic_fetch_add_explicit(&c->runs[result], 1, memory_order_relaxed);
}

void ib_metrics_consumer_observe(ib_metrics_consumer *c, double seconds)
{
    if (c != NULL)
        hist_observe(&c->hist, seconds);
}

/* Slot 0 counts timeouts, 1 other failures, 2.. the statuses 100..599. */
static size_t http_slot(int status)
{
    if (status >= 100 && status <= 599)
        return (size_t)(status - 100) + 2;
    return status == IB_METRICS_HTTP_TIMEOUT ? 0 : 1;
}

void ib_metrics_consumer_http(ib_metrics_consumer *c, int status, double seconds)
{
    if (c == NULL)
        return;
    atomic_fetch_add_explicit(&c->http_codes[http_slot(status)], 1, memory_order_relaxed);
    hist_observe(&c->http_hist, seconds);
    atomic_store_explicit(&c->http_seen, true, memory_order_release);
}

void ib_metrics_consumer_circuit(ib_metrics_consumer *c, ib_metrics_circuit to)
{
    if (c == NULL || (unsigned)to >= IB_METRICS_CIRCUIT_COUNT)
        return;
    atomic_store_explicit(&c->circuit, (int)to, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->transitions[to], 1, memory_order_relaxed);
}

void ib_metrics_consumer_waits(ib_metrics_consumer *c, uint64_t n)
{
    if (c != NULL)
        atomic_fetch_add_explicit(&c->waits, n, memory_order_relaxed);
}

void ib_metrics_consumer_timeout(ib_metrics_consumer *c)
{
    if (c != NULL)
        atomic_fetch_add_explicit(&c->timeouts, 1, memory_order_relaxed);
}

uint64_t ib_metrics_consumer_http_count(const ib_metrics_consumer *c, int status)
{
    if (c == NULL)
        return 0;
    ib_metrics_consumer *cc = (ib_metrics_consumer *)c; /* atomics need non-const */
    return atomic_load_explicit(&cc->http_codes[http_slot(status)], memory_order_relaxed);
}

void ib_metrics_snapshot_get(const ib_metrics *m, ib_metrics_snapshot *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (m == NULL)
        return;
    /* the registry is logically const here; atomics need a non-const pointer */
    ib_metrics *mm = (ib_metrics *)m;
    for (size_t i = 0; i < IB_METRIC_COUNTER_COUNT; i++)
        out->counters[i] = atomic_load_explicit(&mm->counters[i].v, memory_order_relaxed);
    for (size_t i = 0; i < IB_DLQ_REASON_COUNT; i++)
        out->dead_lettered[i] = atomic_load_explicit(&mm->dead[i].v, memory_order_relaxed);
    for (size_t i = 0; i < IB_METRIC_GAUGE_COUNT; i++)
        out->gauges[i] = atomic_load_explicit(&mm->gauges[i].v, memory_order_relaxed);
    for (size_t h = 0; h < IB_METRIC_HISTOGRAM_COUNT; h++) {
        uint64_t sum_ns = atomic_load_explicit(&mm->hist[h].sum_ns, memory_order_acquire);
        uint64_t count = 0;
        for (size_t i = 0; i <= IB_METRICS_BUCKETS; i++) {
            uint64_t c = atomic_load_explicit(&mm->hist[h].buckets[i], memory_order_relaxed);
            out->histograms[h].buckets[i] = c;
            count += c;
        }
        out->histograms[h].count = count;
        out->histograms[h].sum_seconds = (double)sum_ns / 1e9;
    }
}

/* ---- rendering ---- */

typedef struct ib_strbuf {
    char *p;
    size_t len;
    size_t cap;
    int oom;
} ib_strbuf;

static void sb_printf(ib_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(ib_strbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void sb_family(ib_strbuf *b, const char *name, const char *help, const char *type)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Seconds from integer nanoseconds, printed without floating point. */
static void sb_seconds(ib_strbuf *b, uint64_t ns)
{
    sb_printf(b, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

/* One histogram's samples. `labels` is "" or label text with a trailing
 * comma (`consumer="x",`), put before le and inside the braces of _sum and
 * _count. */
static void sb_hist(ib_strbuf *b, const char *name, const char *labels, ib_hist *h)
{
    /* sum first (acquire, pairing with observe's release): a racing
     * observation may show in the buckets without its time, never the
     * reverse, which would look like one impossibly slow sample */
    uint64_t sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_acquire);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= IB_METRICS_BUCKETS; i++) {
        cumulative += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        sb_printf(b, "%s_bucket{%sle=\"%s\"} %" PRIu64 "\n", name, labels, bucket_le[i],
                  cumulative);
    }
    /* "{x=\"y\",}" is valid text format, but "{}" alone reads better as nothing */
    size_t ll = strlen(labels);
    const char *open = ll > 0 ? "{" : "", *close = ll > 0 ? "}" : "";
    int keep = ll > 0 ? (int)ll - 1 : 0; /* without the trailing comma */
    sb_printf(b, "%s_sum%s%.*s%s ", name, open, keep, labels, close);
    sb_seconds(b, sum_ns);
    sb_printf(b, "\n%s_count%s%.*s%s %" PRIu64 "\n", name, open, keep, labels, close, cumulative);
}

/* The fixed families: counters, dead letters by reason, gauges and the
 * process-wide histograms. */
static void render_fixed(ib_strbuf *b, ib_metrics *m)
{
    for (size_t i = 0; i < IB_METRIC_COUNTER_COUNT; i++) {
        sb_family(b, counter_info[i].name, counter_info[i].help, "counter");
        sb_printf(b, "%s %" PRIu64 "\n", counter_info[i].name,
                  atomic_load_explicit(&m->counters[i].v, memory_order_relaxed));
    }

    sb_family(b, "ibus_dead_lettered_total",
              "Messages published to the dead-letter subject, by reason.", "counter");
    for (size_t i = 0; i < IB_DLQ_REASON_COUNT; i++)
        sb_printf(b, "ibus_dead_lettered_total{reason=\"%s\"} %" PRIu64 "\n",
                  ib_dead_letter_reason_str((ib_dead_letter_reason)i),
                  atomic_load_explicit(&m->dead[i].v, memory_order_relaxed));

    for (size_t i = 0; i < IB_METRIC_GAUGE_COUNT; i++) {
        sb_family(b, gauge_info[i].name, gauge_info[i].help, "gauge");
        sb_printf(b, "%s %" PRId64 "\n", gauge_info[i].name,
                  atomic_load_explicit(&m->gauges[i].v, memory_order_relaxed));
    }

    for (size_t h = 0; h < IB_METRIC_HISTOGRAM_COUNT; h++) {
        sb_family(b, hist_info[h].name, hist_info[h].help, "histogram");
        sb_hist(b, hist_info[h].name, "", &m->hist[h]);
    }
}

/* The code label of http slot `k`. */
static void http_code(char out[16], size_t k)
{
    if (k == 0)
        snprintf(out, 16, "timeout");
    else if (k == 1)
        snprintf(out, 16, "error");
    else
        snprintf(out, 16, "%zu", k - 2 + 100);
}

/* The HTTP request families, for the consumers whose handlers made
 * requests; codes never seen are left out (a code is a bounded label:
 * 100..599, timeout, error). */
static void render_http(ib_strbuf *b, ib_metrics_consumer *first)
{
    ib_metrics_consumer *c;
    bool any = false;
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        any = any || atomic_load_explicit(&c->http_seen, memory_order_acquire);
    if (!any)
        return;
    sb_family(b, "ibus_http_requests_total",
              "HTTP requests made by a consumer identity's handler, by status code (timeout: "
              "no answer in time; error: no answer at all).",
              "counter");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
        for (size_t k = 0; k < IB_METRICS_HTTP_CODES; k++) {
            uint64_t n = atomic_load_explicit(&c->http_codes[k], memory_order_relaxed);
            char code[16];
            if (n == 0)
                continue;
            http_code(code, k);
            sb_printf(b, "ibus_http_requests_total{%scode=\"%s\"} %" PRIu64 "\n", c->label, code,
                      n);
        }
    }
    sb_family(b, "ibus_http_request_seconds",
              "Time of one HTTP request made by a consumer identity's handler.", "histogram");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        if (atomic_load_explicit(&c->http_seen, memory_order_acquire))
            sb_hist(b, "ibus_http_request_seconds", c->label, &c->http_hist);
}

/* The circuit and timeout families: every registered consumer, zeros
 * included, so an alert has a series before the first outage. */
static void render_circuits(ib_strbuf *b, ib_metrics_consumer *first)
{
    ib_metrics_consumer *c;
    sb_family(b, "ibus_circuit_state",
              "Circuit of a consumer identity's handler: 0 closed (runs), 1 half-open (one "
              "probe runs), 2 open (not run; its deliveries wait).",
              "gauge");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        sb_printf(b, "ibus_circuit_state{%.*s} %d\n", (int)strlen(c->label) - 1, c->label,
                  atomic_load_explicit(&c->circuit, memory_order_relaxed));
    sb_family(b, "ibus_circuit_transitions_total",
              "Changes of a handler's circuit, by the state it went to.", "counter");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        for (size_t k = 0; k < IB_METRICS_CIRCUIT_COUNT; k++)
            sb_printf(b, "ibus_circuit_transitions_total{%sto=\"%s\"} %" PRIu64 "\n", c->label,
                      circuit_label[k],
                      atomic_load_explicit(&c->transitions[k], memory_order_relaxed));
    sb_family(b, "ibus_circuit_waits_total",
              "Deliveries sent back to wait because the handler's circuit was open (the "
              "handler not run, no attempt spent).",
              "counter");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        sb_printf(b, "ibus_circuit_waits_total{%.*s} %" PRIu64 "\n", (int)strlen(c->label) - 1,
                  c->label, atomic_load_explicit(&c->waits, memory_order_relaxed));
    sb_family(b, "ibus_handler_timeouts_total", "Handler calls that ran past --handler-timeout.",
              "counter");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        sb_printf(b, "ibus_handler_timeouts_total{%.*s} %" PRIu64 "\n", (int)strlen(c->label) - 1,
                  c->label, atomic_load_explicit(&c->timeouts, memory_order_relaxed));
}

/* The per-consumer families: every registered consumer with every result,
 * zeros included, so rate() has a series from the first scrape. */
static void render_consumers(ib_strbuf *b, ib_metrics *m)
{
    ib_metrics_consumer *first = atomic_load_explicit(&m->consumers, memory_order_acquire);
    ib_metrics_consumer *c;

    sb_family(b, "ibus_consumer_runs_total",
              "Handler runs by consumer identity and result (duplicate: skipped, already "
              "marked).",
              "counter");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        for (size_t r = 0; r < IB_METRIC_RESULT_COUNT; r++)
            sb_printf(b, "ibus_consumer_runs_total{%sresult=\"%s\"} %" PRIu64 "\n", c->label,
                      result_label[r], atomic_load_explicit(&c->runs[r], memory_order_relaxed));

    sb_family(b, "ibus_consumer_handle_seconds",
              "Time spent in one call of the handler of a consumer identity.", "histogram");
    for (c = first; c != NULL; c = atomic_load_explicit(&c->next, memory_order_acquire))
        sb_hist(b, "ibus_consumer_handle_seconds", c->label, &c->hist);
    render_circuits(b, first);
    render_http(b, first);
}

ib_status ib_metrics_render(char **out, size_t *len, const ib_metrics *m, ib_error *err)
{
    if (out == NULL || len == NULL || m == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "metrics render: NULL argument");
    /* the registry is logically const here; atomics need a non-const pointer */
    ib_metrics *mm = (ib_metrics *)m;
    ib_strbuf b = {.p = malloc(4096), .len = 0, .cap = 4096, .oom = 0};
    if (b.p == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "metrics render: out of memory");
    b.p[0] = '\0';

    render_fixed(&b, mm);
    render_consumers(&b, mm);
    sb_family(&b, "ibus_build_info", "Build of this ibus process; the value is always 1.", "gauge");
    sb_printf(&b, "ibus_build_info{version=\"%s\"} 1\n", m->version_label);

    if (b.oom) {
        free(b.p);
        return ib_error_set(err, IB_ERR_NOMEM, "metrics render: out of memory");
    }
    *out = b.p;
    *len = b.len;
    return IB_OK;
}
