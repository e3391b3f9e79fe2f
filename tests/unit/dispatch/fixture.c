/* SPDX-License-Identifier: Apache-2.0 */
#include "fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ib_test.h"

/* ---- the counting recorder kind ---------------------------------------- */

typedef struct counting {
    ib_recorder base;
    ib_recorder *inner;
    fx_calls calls;
    ib_recorder_ops ops; /* counting_ops with the real kind's features */
} counting;

static ib_recorder *inner_of(ib_recorder *r)
{
    return ((counting *)r)->inner;
}

static fx_calls *calls_of(ib_recorder *r)
{
    return &((counting *)r)->calls;
}

static ib_status c_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                const char *event_id, ib_error *err)
{
    return ib_recorder_is_processed(inner_of(r), processed, consumer, event_id, err);
}

static ib_status c_mark(ib_recorder *r, const char *consumer, const char *event_id, ib_error *err)
{
    return ib_recorder_mark(inner_of(r), consumer, event_id, err);
}

static void c_close(ib_recorder *r)
{
    ib_recorder_close(inner_of(r));
    free(r);
}

static ib_status c_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys, size_t n,
                               ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->check_batch, 1);
    if (atomic_load(&calls_of(r)->fail_check))
        return ib_error_set(err, IB_ERR_RECORDER, "recorder counting: check fails on demand");
    return ib_recorder_check_batch(inner_of(r), processed, keys, n, err);
}

static ib_status c_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->mark_batch, 1);
    if (atomic_load(&calls_of(r)->fail_mark))
        return ib_error_set(err, IB_ERR_RECORDER, "recorder counting: mark fails on demand");
    return ib_recorder_mark_batch(inner_of(r), keys, n, err);
}

static ib_status c_claim(ib_recorder *r, ib_claim_state *state, const char *consumer,
                         const char *event_id, const char *owner, int64_t lease_ms, ib_error *err)
{
    return ib_recorder_claim(inner_of(r), state, consumer, event_id, owner, lease_ms, err);
}

static ib_status c_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                               size_t n, const char *owner, int64_t lease_ms, ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->claim_batch, 1);
    if (atomic_load(&calls_of(r)->fail_claim))
        return ib_error_set(err, IB_ERR_RECORDER, "recorder counting: claim fails on demand");
    return ib_recorder_claim_batch(inner_of(r), states, keys, n, owner, lease_ms, err);
}

static ib_status c_release(ib_recorder *r, const char *consumer, const char *event_id,
                           const char *owner, ib_error *err)
{
    return ib_recorder_release(inner_of(r), consumer, event_id, owner, err);
}

static ib_status c_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                 const char *owner, ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->release_batch, 1);
    return ib_recorder_release_batch(inner_of(r), keys, n, owner, err);
}

/* The host's calls: counted with the batch calls they stand for (acquire
 * as a claim, a fenced mark as a mark) and failed by the same switches. */
static ib_status c_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                 const uint64_t *fingerprints, size_t n,
                                 const ib_claim_request *req, const ib__acquire_opts *opts,
                                 ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->claim_batch, 1);
    if (atomic_load(&calls_of(r)->fail_claim))
        return ib_error_set(err, IB_ERR_RECORDER, "recorder counting: claim fails on demand");
    /* a claim that waited for the file's turn */
    int delay = atomic_load(&calls_of(r)->claim_delay_ms);
    if (delay > 0) {
        struct timespec pause = {.tv_sec = delay / 1000, .tv_nsec = (delay % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    return ib__recorder_acquire_checked(inner_of(r), out, keys, fingerprints, n, req, opts, err);
}

/* Attempts counted as handlers start pass through; one that releases is
 * counted as a release. */
static ib_status c_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                  const bool *count, size_t n, const char *owner, int64_t lease_ms,
                                  bool release, ib_error *err)
{
    if (release)
        atomic_fetch_add(&calls_of(r)->release_batch, 1);
    return ib__recorder_count_attempts(inner_of(r), held, keys, count, n, owner, lease_ms, release,
                                       err);
}

static ib_status c_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                               const char *owner, int64_t lease_ms, ib_error *err)
{
    atomic_store(&calls_of(r)->renew_thread, pthread_self());
    atomic_fetch_add(&calls_of(r)->renew_batch, 1);
    /* a store that makes a writer wait (another process's transaction) */
    while (atomic_load(&calls_of(r)->block_renew)) {
        atomic_store(&calls_of(r)->renew_blocked, true);
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
    return ib_recorder_renew_batch(inner_of(r), held, keys, n, owner, lease_ms, err);
}

static ib_status c_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                    const uint64_t *fingerprints, size_t n, const char *owner,
                                    ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->mark_batch, 1);
    if (atomic_load(&calls_of(r)->fail_mark))
        return ib_error_set(err, IB_ERR_RECORDER, "recorder counting: mark fails on demand");
    return ib__recorder_mark_owned_fp(inner_of(r), marked, keys, fingerprints, n, owner, err);
}

/* Transactions pass through to the real kind (sqlite: has them), counted
 * and failed on demand before any work runs. */
static ib_status c_transact(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                            const ib_marker_key *keys, size_t n, const ib__txn_request *req,
                            ib__txn_work_fn work, void *ctx, ib_error *err)
{
    atomic_fetch_add(&calls_of(r)->transact, 1);
    if (atomic_load(&calls_of(r)->fail_transact))
        return ib_error_set(err, IB_ERR_RECORDER, "recorder counting: transaction fails on demand");
    return ib__recorder_transact(inner_of(r), out, consumed, keys, n, req, work, ctx, err);
}

/* The end of attempts at a dead letter passes through (the host calls it
 * through ib_dispatch_end_attempts). */
static ib_status c_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    return ib_recorder_end_attempts(inner_of(r), keys, n, err);
}

static const ib_recorder_ops counting_ops = {
    .size = sizeof(ib_recorder_ops),
    .kind = "counting",
    .is_processed = c_is_processed,
    .mark_processed = c_mark,
    .close = c_close,
    .check_batch = c_check_batch,
    .mark_batch = c_mark_batch,
    .claim = c_claim,
    .claim_batch = c_claim_batch,
    .release = c_release,
    .release_batch = c_release_batch,
    .acquire_batch = c_acquire_batch,
    .renew_batch = c_renew_batch,
    .mark_owned_batch = c_mark_owned_batch,
    .transact = c_transact,
    .end_attempts = c_end_attempts,
    .count_attempts = c_count_attempts,
};

/* ---- clock, directories, fixture --------------------------------------- */

static _Atomic int64_t clock_now = 1700000000000;

void fx_clock_set(int64_t now_ms)
{
    atomic_store(&clock_now, now_ms);
}

int64_t fx_clock_now(void)
{
    return atomic_load(&clock_now);
}

static void make_dir(char *out, size_t size)
{
    const char *base = getenv("IB_BUILD_DIR");
    if (base == NULL || base[0] == '\0')
        base = P_tmpdir;
    int len = snprintf(out, size, "%s/dispatch-test-XXXXXX", base);
    assert_true(len > 0 && (size_t)len < size);
    assert_non_null(mkdtemp(out));
}

static void remove_dir(const char *dir)
{
    DIR *dh = opendir(dir);
    if (dh == NULL)
        return;
    struct dirent *e;
    char path[PATH_MAX + 256];
    while ((e = readdir(dh)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(dh);
    rmdir(dir);
}

void fx_open(fx *f, const char *kind)
{
    char uri[PATH_MAX + 64];
    ib_error err = {0};
    ib_recorder_options ro = {.size = sizeof(ro), .now_ms = fx_clock_now};

    memset(f, 0, sizeof(*f));
    f->kind = kind;
    fx_clock_set(1700000000000);
    if (strcmp(kind, "sqlite") == 0) {
        make_dir(f->dir, sizeof(f->dir));
        snprintf(uri, sizeof(uri), "sqlite:%s/markers.db", f->dir);
    } else {
        snprintf(uri, sizeof(uri), "%s:", kind);
    }
    ib_status st = ib_recorder_open(&f->inner, uri, &ro, &err);
    if (st != IB_OK)
        print_error("ib_recorder_open(%s): %s\n", uri, err.msg);
    assert_int_equal(st, IB_OK);

    counting *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    /* The wrapper declares what the real kind declares. */
    c->ops = counting_ops;
    c->ops.features = f->inner->ops->features;
    if (!ib__recorder_has_transactions(f->inner))
        c->ops.transact = NULL; /* as the real kind: memory: has none */
    c->base.ops = &c->ops;
    c->base.now_ms = fx_clock_now;
    c->base.lease_now_ms = fx_clock_now;
    c->inner = f->inner;
    f->rec = &c->base;
    f->calls = &c->calls;
}

ib_dispatch_options fx_default_options(void)
{
    return (ib_dispatch_options){
        .owner = "test-owner",
        .lease_ms = 30000,
        .max_deliver = 0,
        .nak_base_delay_ms = 100,
        .nak_max_delay_ms = 10000,
        .concurrency = 1,
        /* one commit per batch unless a test asks otherwise, so counts of
         * mark calls do not depend on how fast the machine is */
        .commit_interval_ms = 600000,
    };
}

void fx_dispatch(fx *f, const ib_dispatch_options *o)
{
    ib_dispatch_options def = fx_default_options();
    ib_error err = {0};
    ib_status st = ib_dispatch_create(&f->d, f->rec, o != NULL ? o : &def, &err);
    if (st != IB_OK)
        print_error("ib_dispatch_create: %s\n", err.msg);
    assert_int_equal(st, IB_OK);
}

void fx_close(fx *f)
{
    ib_dispatch_free(f->d);
    ib_recorder_close(f->rec);
    if (f->dir[0] != '\0')
        remove_dir(f->dir);
    memset(f, 0, sizeof(*f));
}

bool fx_marked(fx *f, const char *consumer, const char *id)
{
    bool done = false;
    ib_error err = {0};
    assert_int_equal(ib_recorder_is_processed(f->inner, &done, consumer, id, &err), IB_OK);
    return done;
}

/* ---- events and handlers ----------------------------------------------- */

static const char payload_bytes[] = "payload-bytes";
static const ib_event_header headers[] = {{"trace", "t-1"}};

void fx_event(ib_event *ev, unsigned n, const char *type)
{
    memset(ev, 0, sizeof(*ev));
    /* version nibble 4 at index 12, variant 8 at index 16 */
    snprintf(ev->id, sizeof(ev->id), "%08x000040008000%012llx", n,
             (unsigned long long)(n * 2654435761u));
    ev->type = type;
    ev->payload = (const uint8_t *)payload_bytes;
    ev->payload_len = sizeof(payload_bytes) - 1;
    ev->created_at_ms = 1700000000000;
    ev->source = "fixture";
    ev->headers = headers;
    ev->header_count = 1;
}

void fx_delivery(ib_delivery *dl, const ib_event *ev, uint64_t delivery_count)
{
    memset(dl, 0, sizeof(*dl));
    dl->event = ev;
    dl->subject = "events.test";
    dl->stream_seq = 42;
    dl->delivery_count = delivery_count;
    /* poison the outputs, so a test sees whether run() set them */
    dl->outcome = (ib_outcome)99;
    dl->nak_delay_ms = -1;
}

void fx_run_ok(fx *f, ib_delivery *dl, size_t n)
{
    ib_error err = {0};
    ib_status st = ib_dispatch_run(f->d, dl, n, NULL, &err);
    if (st != IB_OK)
        print_error("ib_dispatch_run: %s\n", err.msg);
    assert_int_equal(st, IB_OK);
}

ib_delivery fx_run_one(fx *f, const ib_event *ev, uint64_t delivery_count)
{
    ib_delivery dl;
    fx_delivery(&dl, ev, delivery_count);
    fx_run_ok(f, &dl, 1);
    return dl;
}

void fx_handler_init(fx_handler *h, ib_verdict verdict)
{
    memset(h, 0, sizeof(*h));
    atomic_init(&h->calls, 0);
    atomic_init(&h->verdict, (int)verdict);
    atomic_init(&h->other_thread, false);
    assert_int_equal(pthread_mutex_init(&h->mu, NULL), 0);
}

void fx_handler_destroy(fx_handler *h)
{
    pthread_mutex_destroy(&h->mu);
}

ib_verdict fx_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                     const ib_raw_event *ev)
{
    fx_handler *h = state;
    (void)bus;
    atomic_fetch_add(&h->calls, 1);
    pthread_mutex_lock(&h->mu);
    snprintf(h->consumer, sizeof(h->consumer), "%s", ib_raw_event_consumer(ev));
    snprintf(h->id, sizeof(h->id), "%s", ib_raw_event_id(ev));
    snprintf(h->subject, sizeof(h->subject), "%s", ib_raw_event_subject(ev));
    h->delivery_count = ib_raw_event_delivery_count(ev);
    h->stream_seq = ib_raw_event_stream_seq(ev);
    h->raw_size = ev->size;
    h->payload_len = len;
    size_t raw_len = 0;
    h->payload_matches = ib_raw_event_payload(ev, &raw_len) == payload && raw_len == len;
    const char *v = ib_raw_event_header(ev, "trace");
    snprintf(h->header_value, sizeof(h->header_value), "%s", v != NULL ? v : "");
    const char *tp = ib_raw_event_traceparent(ev), *ts = ib_raw_event_tracestate(ev);
    const ib_trace *cur = ib_trace_current();
    snprintf(h->traceparent, sizeof(h->traceparent), "%s", tp != NULL ? tp : "");
    snprintf(h->tracestate, sizeof(h->tracestate), "%s", ts != NULL ? ts : "");
    h->current_is_event =
        tp != NULL ? cur != NULL && strcmp(cur->traceparent, tp) == 0 : cur == NULL;
    if (h->seen_thread && !pthread_equal(h->thread, pthread_self()))
        atomic_store(&h->other_thread, true);
    h->thread = pthread_self();
    h->seen_thread = true;
    pthread_mutex_unlock(&h->mu);
    return (ib_verdict)atomic_load(&h->verdict);
}

void fx_add(fx *f, const char *consumer, const char *type, fx_handler *h)
{
    const char *types[] = {type, NULL};
    ib_dispatch_handler hd = {
        .consumer = consumer,
        .name = consumer,
        .event_types = types,
        .handle = fx_handle,
        .state = h,
    };
    ib_error err = {0};
    ib_status st = ib_dispatch_add(f->d, &hd, &err);
    if (st != IB_OK)
        print_error("ib_dispatch_add(%s): %s\n", consumer, err.msg);
    assert_int_equal(st, IB_OK);
}

size_t fx_scale(size_t normal, size_t under_valgrind)
{
    const char *v = getenv("IB_UNDER_VALGRIND");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0 ? under_valgrind : normal;
}

void fx_run_case(const char *kind, fx_case fn)
{
    fx f;
    fx_open(&f, kind);
    fn(&f);
    fx_close(&f);
}
