/* SPDX-License-Identifier: Apache-2.0 */
/* The recorder contract, one suite for every kind.
 *
 * Each test runs against the kinds of the table below. CMake builds this
 * file once per kind and sets IB_RECORDER_KIND, so ctest names say which
 * kind failed (recorder_contract_sqlite_file.test_release_frees); run by
 * hand without the variable, a test runs against every local kind in turn.
 *
 * kv runs only when named, against the server in IB_KV_URL with
 * IB_KV_REPLICAS replicas (default 1); an outer fixture starts the server
 * (tests/integration/it_kv_server.c). Every test gets a bucket of its own. */
#include <pthread.h>

#include "ib_test.h"
#include "rtest.h"

#define T0 1700000000000LL
#define LEASE 30000

typedef struct kind {
    const char *name;
    const char *uri; /* %s = a scratch directory */
} kind;

static const kind kinds[] = {
    {"memory", "memory:"},
    {"memory_capped", "memory:?capacity=100000"},
    {"sqlite_memory", "sqlite::memory:"},
    {"sqlite_file", "sqlite:%s/contract.db"},
    {"kv", NULL},
};

static ib_error err;

typedef void (*case_fn)(ib_recorder *r);

/* A fresh bucket on the server the fixture started. */
static void kv_uri(char *uri, size_t cap)
{
    static unsigned bucket_no;
    const char *url = getenv("IB_KV_URL");
    const char *replicas = getenv("IB_KV_REPLICAS");
    if (url == NULL || url[0] == '\0')
        fail_msg("kind kv needs IB_KV_URL (run it through it_kv_server)");
    snprintf(uri, cap, "kv:contract_%ld_%u?create=1&replicas=%s&url=%s", (long)getpid(),
             ++bucket_no, replicas != NULL && replicas[0] != '\0' ? replicas : "1", url);
}

static void run_kind(const kind *k, case_fn fn)
{
    char uri[4200];
    char *dir = NULL;
    ib_recorder *r = NULL;
    if (k->uri == NULL) {
        kv_uri(uri, sizeof(uri));
    } else if (strstr(k->uri, "%s") != NULL) {
        dir = rt_tempdir();
        assert_non_null(dir);
        snprintf(uri, sizeof(uri), k->uri, dir);
    } else {
        snprintf(uri, sizeof(uri), "%s", k->uri);
    }
    rt_clock_set(T0);
    ib_recorder_options o = {.size = sizeof(o), .now_ms = rt_clock};
    print_message("[ kind     ] %s (%s)\n", k->name, uri);
    CHECK(ib_recorder_open(&r, uri, &o, &err));
    fn(r);
    ib_recorder_close(r);
    if (dir != NULL) {
        rt_rmtree(dir);
        free(dir);
    }
}

static void for_each_kind(case_fn fn)
{
    const char *only = getenv("IB_RECORDER_KIND");
    int ran = 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (only != NULL ? strcmp(only, kinds[i].name) != 0 : kinds[i].uri == NULL)
            continue;
        run_kind(&kinds[i], fn);
        ran++;
    }
    if (ran == 0)
        fail_msg("IB_RECORDER_KIND=%s names no kind", only);
}

#define CONTRACT(name)                                                                             \
    static void name##_case(ib_recorder *r);                                                       \
    static void name(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        for_each_kind(name##_case);                                                                \
    }                                                                                              \
    static void name##_case(ib_recorder *r)

static bool processed(ib_recorder *r, const char *consumer, const char *id)
{
    bool p = true;
    CHECK(ib_recorder_is_processed(r, &p, consumer, id, &err));
    return p;
}

static ib_claim_state claim(ib_recorder *r, const char *consumer, const char *id, const char *owner,
                            int64_t lease)
{
    ib_claim_state s = (ib_claim_state)-1;
    CHECK(ib_recorder_claim(r, &s, consumer, id, owner, lease, &err));
    return s;
}

static ib_recorder_stats stats(ib_recorder *r)
{
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    return s;
}

/* --- the seed protocol ------------------------------------------------ */

CONTRACT(test_unmarked_is_not_processed)
{
    char id[IB_ID_BUF_SIZE];
    for (uint64_t i = 0; i < 50; i++) {
        rt_id(id, i);
        assert_false(processed(r, "svc/plugin/handler", id));
    }
    assert_int_equal(stats(r).markers, 0);
}

CONTRACT(test_mark_then_processed)
{
    char id[IB_ID_BUF_SIZE], other[IB_ID_BUF_SIZE];
    rt_id(id, 1);
    rt_id(other, 2);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    assert_true(processed(r, "c", id));
    assert_false(processed(r, "c", other));
    assert_int_equal(stats(r).markers, 1);
}

CONTRACT(test_mark_twice_harmless)
{
    char id[IB_ID_BUF_SIZE];
    bool found = false;
    int64_t ts = 0;
    rt_id(id, 7);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    rt_clock_advance(5000);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    assert_true(processed(r, "c", id));
    assert_int_equal(stats(r).markers, 1);
    /* The first mark's time stays: a replay does not look fresh. */
    CHECK(ib_recorder_lookup(r, &found, &ts, "c", id, &err));
    assert_true(found);
    assert_int_equal(ts, T0);
}

CONTRACT(test_consumers_independent)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 3);
    CHECK(ib_recorder_mark(r, "durable/a/h", id, &err));
    assert_true(processed(r, "durable/a/h", id));
    assert_false(processed(r, "durable/b/h", id));
    assert_false(processed(r, "durable/a/h2", id));
    CHECK(ib_recorder_mark(r, "durable/b/h", id, &err));
    assert_true(processed(r, "durable/b/h", id));
    ib_recorder_stats s = stats(r);
    assert_int_equal(s.markers, 2);
    assert_int_equal(s.consumers, 2);
}

CONTRACT(test_invalid_keys_refused)
{
    char id[IB_ID_BUF_SIZE], longc[IB_CONSUMER_MAX + 2], longo[IB_OWNER_MAX + 2];
    bool p = false;
    ib_claim_state cs;
    rt_id(id, 9);
    memset(longc, 'c', sizeof(longc) - 1);
    longc[sizeof(longc) - 1] = '\0'; /* IB_CONSUMER_MAX + 1 bytes */
    memset(longo, 'o', sizeof(longo) - 1);
    longo[sizeof(longo) - 1] = '\0';
    char upper[IB_ID_BUF_SIZE];
    memcpy(upper, id, sizeof(upper));
    for (char *c = upper; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    const char *bad_ids[] = {
        upper,                                  /* upper case */
        "6ba7b810-9dad-41d1-80b4-00c04fd430c8", /* dashed */
        "6ba7b8109dad41d180b400c04fd430c",      /* 31 */
        "6ba7b8109dad41d180b400c04fd430c8a",    /* 33 */
        "6ba7b8109dad41d180b400c04fd430cg",     /* non-hex */
        "",
        NULL,
    };
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        assert_int_equal(ib_recorder_is_processed(r, &p, "c", bad_ids[i], &err),
                         IB_ERR_INVALID_ARG);
        assert_int_equal(ib_recorder_mark(r, "c", bad_ids[i], &err), IB_ERR_INVALID_ARG);
        assert_non_null(strstr(err.msg, "event id"));
        assert_int_equal(ib_recorder_claim(r, &cs, "c", bad_ids[i], "o", LEASE, &err),
                         IB_ERR_INVALID_ARG);
        assert_int_equal(ib_recorder_release(r, "c", bad_ids[i], "o", &err), IB_ERR_INVALID_ARG);
    }
    const char *bad_consumers[] = {"", NULL, longc};
    for (size_t i = 0; i < sizeof(bad_consumers) / sizeof(bad_consumers[0]); i++) {
        assert_int_equal(ib_recorder_mark(r, bad_consumers[i], id, &err), IB_ERR_INVALID_ARG);
        assert_non_null(strstr(err.msg, "consumer"));
        assert_int_equal(ib_recorder_is_processed(r, &p, bad_consumers[i], id, &err),
                         IB_ERR_INVALID_ARG);
    }
    /* The longest consumer allowed works. */
    longc[IB_CONSUMER_MAX] = '\0';
    CHECK(ib_recorder_mark(r, longc, id, &err));
    assert_true(processed(r, longc, id));
    /* Owners and leases are checked too. */
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, "", LEASE, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, NULL, LEASE, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, longo, LEASE, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, "o", 0, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, "o", -5, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_is_processed(r, NULL, "c", id, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_is_processed(NULL, &p, "c", id, &err), IB_ERR_INVALID_ARG);

    /* One bad key refuses the whole batch before anything is written. */
    char good[IB_ID_BUF_SIZE];
    rt_id(good, 10);
    ib_marker_key keys[3] = {{"c", good}, {"c", "nothex"}, {"c", id}};
    assert_int_equal(ib_recorder_mark_batch(r, keys, 3, &err), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "key 1 of 3"));
    assert_false(processed(r, "c", good));
    bool out[3];
    ib_claim_state states[3];
    assert_int_equal(ib_recorder_check_batch(r, out, keys, 3, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_claim_batch(r, states, keys, 3, "o", LEASE, &err),
                     IB_ERR_INVALID_ARG);
    assert_false(processed(r, "c", good));
    assert_int_equal(stats(r).claims, 0);
}

CONTRACT(test_batch_agrees_with_single)
{
    enum { N = 300 };
    static char ids[N][IB_ID_BUF_SIZE];
    ib_marker_key keys[N];
    bool batch[N];
    for (unsigned i = 0; i < N; i++) {
        rt_id(ids[i], 100 + i);
        keys[i].consumer = i % 2 ? "odd" : "even";
        keys[i].event_id = ids[i];
    }
    /* A third marked one by one, a third in a batch, a third never. */
    for (unsigned i = 0; i < N / 3; i++)
        CHECK(ib_recorder_mark(r, keys[i].consumer, keys[i].event_id, &err));
    CHECK(ib_recorder_mark_batch(r, &keys[N / 3], N / 3, &err));
    CHECK(ib_recorder_check_batch(r, batch, keys, N, &err));
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(batch[i], i < 2 * N / 3);
        assert_int_equal(batch[i], processed(r, keys[i].consumer, keys[i].event_id));
    }
    /* A batch that repeats a key, and an empty batch, are fine. */
    ib_marker_key twice[2] = {keys[N - 1], keys[N - 1]};
    CHECK(ib_recorder_mark_batch(r, twice, 2, &err));
    CHECK(ib_recorder_mark_batch(r, NULL, 0, &err));
    CHECK(ib_recorder_check_batch(r, NULL, NULL, 0, &err));
    assert_int_equal(stats(r).markers, 2 * N / 3 + 1);
}

/* --- claims -------------------------------------------------------------- */

CONTRACT(test_claim_free_then_same_owner_extends)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 20);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    assert_int_equal(stats(r).claims, 1);
    rt_clock_advance(LEASE - 10000);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    assert_int_equal(stats(r).claims, 1);
    /* Past the first lease but inside the renewed one. */
    rt_clock_advance(20000);
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_BUSY);
    /* A claim is not a marker. */
    assert_false(processed(r, "c", id));
    assert_int_equal(stats(r).markers, 0);
}

CONTRACT(test_claim_other_owner_busy)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 21);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_BUSY);
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_BUSY);
    /* Another consumer's claim on the same id is its own. */
    assert_int_equal(claim(r, "other", id, "B", LEASE), IB_CLAIM_ACQUIRED);
    assert_int_equal(stats(r).claims, 2);
}

CONTRACT(test_claim_after_mark_done)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 22);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    /* Marking cleared the claim. */
    assert_int_equal(stats(r).claims, 0);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_DONE);
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_DONE);
    rt_clock_advance(10 * LEASE);
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_DONE);
    assert_int_equal(stats(r).claims, 0);
}

CONTRACT(test_release_frees)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 23);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    /* Only the holder can release. */
    CHECK(ib_recorder_release(r, "c", id, "B", &err));
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_BUSY);
    CHECK(ib_recorder_release(r, "c", id, "A", &err));
    assert_int_equal(stats(r).claims, 0);
    assert_false(processed(r, "c", id));
    assert_int_equal(claim(r, "c", id, "B", LEASE), IB_CLAIM_ACQUIRED);
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_BUSY);
    /* Releasing what nobody holds is harmless. */
    char free_id[IB_ID_BUF_SIZE];
    rt_id(free_id, 24);
    CHECK(ib_recorder_release(r, "c", free_id, "A", &err));
    CHECK(ib_recorder_release(r, "unknown-consumer", free_id, "A", &err));
}

CONTRACT(test_release_batch_frees)
{
    enum { N = 20 };
    char ids[N][IB_ID_BUF_SIZE];
    ib_marker_key keys[N];
    ib_claim_state states[N];
    for (unsigned i = 0; i < N; i++) {
        rt_id(ids[i], 500 + i);
        keys[i] = (ib_marker_key){"c", ids[i]};
    }
    CHECK(ib_recorder_claim_batch(r, states, keys, N, "A", LEASE, &err));
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(states[i], IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_release_batch(r, keys, N / 2, "A", &err));
    assert_int_equal(stats(r).claims, N - N / 2);
    CHECK(ib_recorder_claim_batch(r, states, keys, N, "B", LEASE, &err));
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(states[i], i < N / 2 ? IB_CLAIM_ACQUIRED : IB_CLAIM_BUSY);
}

CONTRACT(test_expired_lease_taken_over)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 25);
    assert_int_equal(claim(r, "c", id, "A", 1000), IB_CLAIM_ACQUIRED);
    rt_clock_advance(999);
    assert_int_equal(claim(r, "c", id, "B", 1000), IB_CLAIM_BUSY);
    rt_clock_advance(1);
    /* The lease ends at exactly claim time + lease. */
    assert_int_equal(claim(r, "c", id, "B", 1000), IB_CLAIM_ACQUIRED);
    assert_int_equal(claim(r, "c", id, "A", 1000), IB_CLAIM_BUSY);
    assert_int_equal(stats(r).claims, 1);
    /* The old holder's release no longer touches the new claim. */
    CHECK(ib_recorder_release(r, "c", id, "A", &err));
    assert_int_equal(claim(r, "c", id, "A", 1000), IB_CLAIM_BUSY);
}

CONTRACT(test_claim_batch_states)
{
    char done[IB_ID_BUF_SIZE], busy[IB_ID_BUF_SIZE], fresh[IB_ID_BUF_SIZE];
    rt_id(done, 30);
    rt_id(busy, 31);
    rt_id(fresh, 32);
    CHECK(ib_recorder_mark(r, "c", done, &err));
    assert_int_equal(claim(r, "c", busy, "B", LEASE), IB_CLAIM_ACQUIRED);
    ib_marker_key keys[4] = {{"c", done}, {"c", busy}, {"c", fresh}, {"c2", busy}};
    ib_claim_state states[4];
    CHECK(ib_recorder_claim_batch(r, states, keys, 4, "A", LEASE, &err));
    assert_int_equal(states[0], IB_CLAIM_DONE);
    assert_int_equal(states[1], IB_CLAIM_BUSY);
    assert_int_equal(states[2], IB_CLAIM_ACQUIRED);
    assert_int_equal(states[3], IB_CLAIM_ACQUIRED);
    /* Single claims agree. */
    assert_int_equal(claim(r, "c", done, "A", LEASE), IB_CLAIM_DONE);
    assert_int_equal(claim(r, "c", busy, "A", LEASE), IB_CLAIM_BUSY);
    assert_int_equal(claim(r, "c", fresh, "A", LEASE), IB_CLAIM_ACQUIRED);
    assert_int_equal(stats(r).claims, 3);
}

typedef struct racer {
    ib_recorder *r;
    pthread_barrier_t *barrier;
    const char *owner;
    unsigned n;
    ib_claim_state *states;
    int errors;
} racer;

static void *race(void *arg)
{
    racer *x = arg;
    char id[IB_ID_BUF_SIZE];
    ib_error e;
    for (unsigned i = 0; i < x->n; i++) {
        rt_id(id, 10000 + i);
        pthread_barrier_wait(x->barrier);
        if (ib_recorder_claim(x->r, &x->states[i], "race", id, x->owner, 60000, &e) != IB_OK)
            x->errors++;
    }
    return NULL;
}

CONTRACT(test_concurrent_claim_one_winner)
{
    unsigned n = rt_scale(2000);
    pthread_barrier_t barrier;
    pthread_t ta, tb;
    racer a = {r, &barrier, "owner-A", n, calloc(n, sizeof(ib_claim_state)), 0};
    racer b = {r, &barrier, "owner-B", n, calloc(n, sizeof(ib_claim_state)), 0};
    assert_non_null(a.states);
    assert_non_null(b.states);
    assert_int_equal(pthread_barrier_init(&barrier, NULL, 2), 0);
    assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&barrier);
    assert_int_equal(a.errors, 0);
    assert_int_equal(b.errors, 0);
    unsigned wins_a = 0;
    for (unsigned i = 0; i < n; i++) {
        int acquired = (a.states[i] == IB_CLAIM_ACQUIRED) + (b.states[i] == IB_CLAIM_ACQUIRED);
        int busy = (a.states[i] == IB_CLAIM_BUSY) + (b.states[i] == IB_CLAIM_BUSY);
        if (acquired != 1 || busy != 1)
            fail_msg("id %u: A=%d B=%d", i, a.states[i], b.states[i]);
        wins_a += a.states[i] == IB_CLAIM_ACQUIRED;
    }
    print_message("[ race     ] %u ids, A won %u, B won %u\n", n, wins_a, n - wins_a);
    assert_int_equal(stats(r).claims, n);
    free(a.states);
    free(b.states);
}

typedef struct marker_thread {
    ib_recorder *r;
    unsigned first, count;
    int errors;
} marker_thread;

static void *mark_range(void *arg)
{
    marker_thread *x = arg;
    char id[IB_ID_BUF_SIZE];
    ib_error e;
    for (unsigned i = x->first; i < x->first + x->count; i++) {
        rt_id(id, i);
        if (ib_recorder_mark(x->r, i % 3 ? "m1" : "m2", id, &e) != IB_OK)
            x->errors++;
    }
    return NULL;
}

CONTRACT(test_concurrent_marks_all_kept)
{
    enum { THREADS = 4 };
    unsigned per = rt_scale(5000);
    pthread_t t[THREADS];
    marker_thread m[THREADS];
    /* Ranges overlap by half: every id is marked by two threads. */
    for (unsigned i = 0; i < THREADS; i++) {
        m[i] = (marker_thread){r, i * per / 2, per, 0};
        assert_int_equal(pthread_create(&t[i], NULL, mark_range, &m[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(m[i].errors, 0);
    }
    unsigned total = (THREADS - 1) * per / 2 + per;
    char id[IB_ID_BUF_SIZE];
    for (unsigned i = 0; i < total; i++) {
        rt_id(id, i);
        assert_true(processed(r, i % 3 ? "m1" : "m2", id));
    }
    assert_int_equal(stats(r).markers, total);
}

/* --- admin calls ------------------------------------------------------------ */

CONTRACT(test_lookup_and_forget)
{
    char id[IB_ID_BUF_SIZE];
    bool found = true, existed = false;
    int64_t ts = -1;
    rt_id(id, 40);
    CHECK(ib_recorder_lookup(r, &found, &ts, "c", id, &err));
    assert_false(found);
    assert_int_equal(ts, 0);
    rt_clock_advance(1234);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    CHECK(ib_recorder_lookup(r, &found, &ts, "c", id, &err));
    assert_true(found);
    assert_int_equal(ts, T0 + 1234);
    CHECK(ib_recorder_forget(r, &existed, "c", id, &err));
    assert_true(existed);
    assert_false(processed(r, "c", id));
    CHECK(ib_recorder_forget(r, &existed, "c", id, &err));
    assert_false(existed);
    /* Forgotten means it can be processed and marked again. */
    assert_int_equal(claim(r, "c", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    assert_true(processed(r, "c", id));
    assert_int_equal(stats(r).markers, 1);
}

CONTRACT(test_prune_removes_only_old)
{
    enum { OLD = 40, NEW = 25 };
    char id[IB_ID_BUF_SIZE];
    uint64_t removed = 0;
    if (strcmp(ib_recorder_kind(r), "kv") == 0) {
        /* The bucket's TTL prunes; the call says so. */
        assert_int_equal(ib_recorder_prune(r, &removed, T0, &err), IB_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "TTL"));
        return;
    }
    /* A claim whose lease ended before the cutoff, and (below) one still
     * running: a lease that ended within the retention window may still
     * count attempts the poison rule needs, so it may be kept. */
    char c1[IB_ID_BUF_SIZE], c2[IB_ID_BUF_SIZE];
    rt_id(c1, 3000);
    rt_id(c2, 3001);
    assert_int_equal(claim(r, "p1", c1, "A", 1000), IB_CLAIM_ACQUIRED);
    for (unsigned i = 0; i < OLD; i++) {
        rt_id(id, 1000 + i);
        CHECK(ib_recorder_mark(r, i % 2 ? "p1" : "p2", id, &err));
    }
    rt_clock_advance(60000);
    for (unsigned i = 0; i < NEW; i++) {
        rt_id(id, 2000 + i);
        CHECK(ib_recorder_mark(r, i % 2 ? "p1" : "p2", id, &err));
    }
    assert_int_equal(claim(r, "p1", c2, "A", 100000), IB_CLAIM_ACQUIRED);
    rt_clock_advance(5000);

    CHECK(ib_recorder_prune(r, &removed, T0 + 60000, &err));
    assert_int_equal(removed, OLD);
    for (unsigned i = 0; i < OLD; i++) {
        rt_id(id, 1000 + i);
        assert_false(processed(r, i % 2 ? "p1" : "p2", id));
    }
    for (unsigned i = 0; i < NEW; i++) {
        rt_id(id, 2000 + i);
        assert_true(processed(r, i % 2 ? "p1" : "p2", id));
    }
    ib_recorder_stats s = stats(r);
    assert_int_equal(s.markers, NEW);
    assert_int_equal(s.claims, 1);
    assert_int_equal(s.oldest_ts_ms, T0 + 60000);
    /* The live claim survived. */
    assert_int_equal(claim(r, "p1", c2, "B", 1000), IB_CLAIM_BUSY);
    /* Nothing more to prune. */
    CHECK(ib_recorder_prune(r, &removed, T0 + 60000, &err));
    assert_int_equal(removed, 0);
}

typedef struct listing {
    unsigned n, stop_after;
    char consumers[16][16];
    char ids[16][IB_ID_BUF_SIZE];
    int64_t ts[16];
} listing;

static int collect(void *ctx, const ib_marker_info *m)
{
    listing *l = ctx;
    if (l->n < 16) {
        snprintf(l->consumers[l->n], sizeof(l->consumers[0]), "%s", m->consumer);
        memcpy(l->ids[l->n], m->event_id, IB_ID_BUF_SIZE);
        l->ts[l->n] = m->ts_ms;
    }
    l->n++;
    return l->stop_after != 0 && l->n >= l->stop_after;
}

CONTRACT(test_list_newest_first)
{
    char id[IB_ID_BUF_SIZE];
    for (unsigned i = 0; i < 6; i++) {
        rt_id(id, 4000 + i);
        CHECK(ib_recorder_mark(r, i % 2 ? "l1" : "l2", id, &err));
        rt_clock_advance(10);
    }
    listing all = {0};
    CHECK(ib_recorder_list(r, NULL, 0, collect, &all, &err));
    assert_int_equal(all.n, 6);
    for (unsigned i = 0; i < 6; i++) {
        rt_id(id, 4000 + 5 - i);
        assert_string_equal(all.ids[i], id);
        assert_string_equal(all.consumers[i], (5 - i) % 2 ? "l1" : "l2");
        assert_int_equal(all.ts[i], T0 + 10 * (5 - i));
    }
    listing one = {0};
    CHECK(ib_recorder_list(r, "l1", 2, collect, &one, &err));
    assert_int_equal(one.n, 2);
    rt_id(id, 4005);
    assert_string_equal(one.ids[0], id);
    rt_id(id, 4003);
    assert_string_equal(one.ids[1], id);
    listing stop = {.stop_after = 3};
    CHECK(ib_recorder_list(r, NULL, 0, collect, &stop, &err));
    assert_int_equal(stop.n, 3);
    listing none = {0};
    CHECK(ib_recorder_list(r, "nobody", 0, collect, &none, &err));
    assert_int_equal(none.n, 0);
}

CONTRACT(test_stats_counts)
{
    char id[IB_ID_BUF_SIZE];
    ib_recorder_stats s = stats(r);
    assert_int_equal(s.markers, 0);
    assert_int_equal(s.consumers, 0);
    assert_int_equal(s.oldest_ts_ms, 0);
    assert_int_equal(s.newest_ts_ms, 0);
    for (unsigned i = 0; i < 9; i++) {
        rt_id(id, 5000 + i);
        CHECK(ib_recorder_mark(r, i < 3 ? "s1" : i < 6 ? "s2" : "s3", id, &err));
        rt_clock_advance(100);
    }
    rt_id(id, 5999);
    assert_int_equal(claim(r, "s1", id, "A", LEASE), IB_CLAIM_ACQUIRED);
    s = stats(r);
    assert_int_equal(s.markers, 9);
    assert_int_equal(s.consumers, 3);
    assert_int_equal(s.claims, 1);
    assert_int_equal(s.oldest_ts_ms, T0);
    assert_int_equal(s.newest_ts_ms, T0 + 800);
    assert_true(s.storage_bytes > 0);
    const char *kind = ib_recorder_kind(r);
    assert_true(strcmp(kind, "memory") == 0 || strcmp(kind, "sqlite") == 0 ||
                strcmp(kind, "kv") == 0);
}

/* ---- attempts, fenced leases and marks (the host's calls) ------------- */

static ib_claim_info acquire(ib_recorder *r, const char *consumer, const char *id,
                             const char *owner, int64_t lease, uint32_t max_attempts)
{
    ib_marker_key key = {consumer, id};
    ib_claim_request req = {.owner = owner, .lease_ms = lease, .max_attempts = max_attempts};
    ib_claim_info info;
    memset(&info, 0xff, sizeof(info));
    CHECK(ib_recorder_acquire_batch(r, &info, &key, 1, &req, &err));
    return info;
}

CONTRACT(test_acquire_counts_attempts_and_exhausts)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 6000);
    ib_claim_info i1 = acquire(r, "a", id, "A", LEASE, 2);
    assert_int_equal(i1.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(i1.attempts, 1);
    /* held: another owner is busy for the rest of the lease */
    rt_clock_advance(LEASE / 4);
    ib_claim_info busy = acquire(r, "a", id, "B", LEASE, 2);
    assert_int_equal(busy.state, IB_CLAIM_BUSY);
    assert_int_equal(busy.remaining_ms, LEASE - LEASE / 4);
    /* a busy answer counts no attempt; the holder fails and releases */
    CHECK(ib_recorder_release(r, "a", id, "A", &err));
    if (!ib_recorder_has_durable_attempts(r)) {
        /* memory forgets attempts on release: the host then counts
         * deliveries instead */
        assert_int_equal(acquire(r, "a", id, "B", LEASE, 2).state, IB_CLAIM_ACQUIRED);
        return;
    }
    ib_claim_info i2 = acquire(r, "a", id, "B", LEASE, 2);
    assert_int_equal(i2.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(i2.attempts, 2);
    CHECK(ib_recorder_release(r, "a", id, "B", &err));
    /* the budget is spent: not claimed, not counted, for anyone */
    ib_claim_info ex = acquire(r, "a", id, "C", LEASE, 2);
    assert_int_equal(ex.state, IB_CLAIM_EXHAUSTED);
    assert_int_equal(ex.attempts, 2);
    assert_int_equal(acquire(r, "a", id, "C", LEASE, 3).attempts, 3);
    /* a crash (no release): the lease must end before another takes it */
    assert_int_equal(acquire(r, "a", id, "D", LEASE, 9).state, IB_CLAIM_BUSY);
    rt_clock_advance(LEASE);
    assert_int_equal(acquire(r, "a", id, "D", LEASE, 9).attempts, 4);
    /* marking ends it all */
    CHECK(ib_recorder_mark(r, "a", id, &err));
    assert_int_equal(acquire(r, "a", id, "E", LEASE, 1).state, IB_CLAIM_DONE);
}

/* The claim of `ibus run`: nothing counted at the claim; an attempt per
 * call, counted by ib__recorder_count_attempts as the call starts (alone)
 * or as its RETRY is freed; taken_over says which claims a holder left
 * without releasing (issue 43: a crash spends its own call's attempt). */
static ib_claim_info acquire_deferred(ib_recorder *r, bool *taken_over, const char *id,
                                      const char *owner, uint32_t max_attempts)
{
    ib_marker_key key = {"a", id};
    ib_claim_request req = {.owner = owner, .lease_ms = LEASE, .max_attempts = max_attempts};
    ib__acquire_opts opts = {.defer_attempts = true, .taken_over = taken_over};
    ib_claim_info info;
    memset(&info, 0xff, sizeof(info));
    CHECK(ib__recorder_acquire_checked(r, &info, &key, NULL, 1, &req, &opts, &err));
    return info;
}

static bool count_one(ib_recorder *r, const char *id, const char *owner, bool release)
{
    ib_marker_key key = {"a", id};
    bool held = false;
    CHECK(ib__recorder_count_attempts(r, &held, &key, NULL, 1, owner, LEASE, release, &err));
    return held;
}

CONTRACT(test_attempts_counted_as_calls_start)
{
    char id[IB_ID_BUF_SIZE], mate[IB_ID_BUF_SIZE];
    bool taken = true;
    rt_id(id, 6100);
    rt_id(mate, 6101);
    /* a batch of two claims: neither counted, neither taken over */
    ib_claim_info i1 = acquire_deferred(r, &taken, id, "A", 2);
    assert_int_equal(i1.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(i1.attempts, 0);
    assert_false(taken);
    assert_int_equal(acquire_deferred(r, &taken, mate, "A", 2).attempts, 0);
    /* A's call on `id` starts alone, counted first; then A dies (no
     * release): the lease ends and B takes both over */
    assert_true(count_one(r, id, "A", false));
    rt_clock_advance(LEASE + 1);
    ib_claim_info t1 = acquire_deferred(r, &taken, id, "B", 2);
    assert_int_equal(t1.state, IB_CLAIM_ACQUIRED);
    assert_true(taken);
    ib_claim_info t2 = acquire_deferred(r, &taken, mate, "B", 2);
    assert_true(taken);
    /* the owner that lost its claims counts nothing on them */
    assert_false(count_one(r, id, "A", false));
    if (!ib_recorder_has_durable_attempts(r))
        return; /* memory: the host counts deliveries instead */
    assert_int_equal(t1.attempts, 1);
    /* the batch mate that never ran spent nothing */
    assert_int_equal(t2.attempts, 0);
    /* B's call on `id` returns RETRY: counted as it is freed, once */
    bool count[2] = {true, false};
    ib_marker_key keys[2] = {{"a", id}, {"a", mate}};
    bool held[2] = {false, false};
    CHECK(ib__recorder_count_attempts(r, held, keys, count, 2, "B", 0, true, &err));
    assert_true(held[0] && held[1]);
    /* released (owner ''): not taken over; the budget of 2 is spent */
    ib_claim_info ex = acquire_deferred(r, &taken, id, "C", 2);
    assert_int_equal(ex.state, IB_CLAIM_EXHAUSTED);
    assert_int_equal(ex.attempts, 2);
    assert_false(taken);
    ib_claim_info m = acquire_deferred(r, &taken, mate, "C", 2);
    assert_int_equal(m.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(m.attempts, 0);
    assert_false(taken);
    /* a count renews the lease of its holder: no one else takes it */
    rt_clock_advance(LEASE / 2);
    assert_true(count_one(r, mate, "C", false));
    rt_clock_advance(LEASE / 2 + 1);
    assert_int_equal(acquire_deferred(r, &taken, mate, "D", 9).state, IB_CLAIM_BUSY);
    ib_marker_state ms;
    CHECK(ib_recorder_inspect(r, &ms, "a", mate, &err));
    assert_int_equal(ms.attempts, 1);
    /* a key its holder marked has no claim left to count on */
    bool marked = false;
    ib_marker_key mk = {"a", mate};
    CHECK(ib_recorder_mark_owned_batch(r, &marked, &mk, 1, "C", &err));
    assert_true(marked);
    assert_false(count_one(r, mate, "C", false));
}

CONTRACT(test_renew_and_mark_are_fenced)
{
    char id[IB_ID_BUF_SIZE];
    ib_marker_key key;
    bool held = false, marked = true;
    rt_id(id, 6100);
    key = (ib_marker_key){"f", id};
    assert_int_equal(acquire(r, "f", id, "A", LEASE, 0).state, IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_renew_batch(r, &held, &key, 1, "A", LEASE, &err));
    assert_true(held);
    /* A's lease ends, B takes the claim over */
    rt_clock_advance(LEASE + 1);
    assert_int_equal(acquire(r, "f", id, "B", LEASE, 0).state, IB_CLAIM_ACQUIRED);
    /* A finds out: no renewal, and no mark over B */
    CHECK(ib_recorder_renew_batch(r, &held, &key, 1, "A", LEASE, &err));
    assert_false(held);
    CHECK(ib_recorder_mark_owned_batch(r, &marked, &key, 1, "A", &err));
    assert_false(marked);
    assert_false(processed(r, "f", id));
    /* B marks */
    CHECK(ib_recorder_mark_owned_batch(r, &marked, &key, 1, "B", &err));
    assert_true(marked);
    assert_true(processed(r, "f", id));
    /* marked already: true for anyone, nothing changes */
    CHECK(ib_recorder_mark_owned_batch(r, &marked, &key, 1, "A", &err));
    assert_true(marked);
    /* a key nobody claimed is marked */
    rt_id(id, 6101);
    CHECK(ib_recorder_mark_owned_batch(r, &marked, &key, 1, "A", &err));
    assert_true(marked);
}

/* The *_checked entry points the dispatcher uses: the fenced flow gives
 * what the public calls give, the checks other than the per-key ones
 * stay, and the public and *_fp calls still refuse bad keys. */
CONTRACT(test_checked_entry_points)
{
    char ids[3][IB_ID_BUF_SIZE];
    ib_marker_key keys[3];
    for (int i = 0; i < 3; i++) {
        rt_id(ids[i], 6200 + (uint64_t)i);
        keys[i] = (ib_marker_key){"chk", ids[i]};
    }
    keys[2].consumer = "chk-never-seen";
    ib_claim_request req_a = {.owner = "A", .lease_ms = LEASE};
    ib_claim_request req_b = {.owner = "B", .lease_ms = LEASE};
    ib_claim_info info[3];
    bool marked[3] = {false, false, false};
    uint64_t fps[3] = {0x1111000000000001ull, 0, 0x1111000000000001ull};

    CHECK(ib__recorder_acquire_checked(r, info, keys, fps, 2, &req_a, NULL, &err));
    assert_int_equal(info[0].state, IB_CLAIM_ACQUIRED);
    assert_int_equal(info[1].state, IB_CLAIM_ACQUIRED);
    assert_int_equal(acquire(r, "chk", ids[0], "B", LEASE, 0).state, IB_CLAIM_BUSY);
    /* B may not mark over A's running lease; A may; a key of a consumer
     * the recorder never saw is marked */
    CHECK(ib__recorder_mark_owned_checked(r, marked, keys, fps, 1, "B", &err));
    assert_false(marked[0]);
    assert_false(processed(r, "chk", ids[0]));
    CHECK(ib__recorder_mark_owned_checked(r, marked, keys, fps, 3, "A", &err));
    assert_true(marked[0] && marked[1] && marked[2]);
    assert_true(processed(r, "chk", ids[0]));
    assert_true(processed(r, "chk-never-seen", ids[2]));
    CHECK(ib__recorder_acquire_checked(r, info, keys, fps, 3, &req_b, NULL, &err));
    for (int i = 0; i < 3; i++)
        assert_int_equal(info[i].state, IB_CLAIM_DONE);

    /* an ended lease of another owner does not fence a mark, and the mark
     * frees the claim */
    rt_id(ids[1], 6210);
    CHECK(ib__recorder_acquire_checked(r, info, &keys[1], NULL, 1, &req_a, NULL, &err));
    assert_int_equal(info[0].state, IB_CLAIM_ACQUIRED);
    rt_clock_advance(LEASE + 1);
    CHECK(ib__recorder_mark_owned_checked(r, marked, &keys[1], NULL, 1, "B", &err));
    assert_true(marked[0]);
    assert_int_equal(acquire(r, "chk", ids[1], "C", LEASE, 0).state, IB_CLAIM_DONE);

    /* what is still checked */
    assert_int_equal(ib__recorder_acquire_checked(NULL, info, keys, NULL, 1, &req_a, NULL, &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib__recorder_acquire_checked(r, NULL, keys, NULL, 1, &req_a, NULL, &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib__recorder_acquire_checked(r, info, keys, NULL, 1, NULL, NULL, &err),
                     IB_ERR_INVALID_ARG);
    ib_claim_request no_lease = {.owner = "A", .lease_ms = 0};
    assert_int_equal(ib__recorder_acquire_checked(r, info, keys, NULL, 1, &no_lease, NULL, &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib__recorder_mark_owned_checked(r, marked, keys, NULL, 1, "", &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib__recorder_mark_owned_checked(r, NULL, keys, NULL, 1, "A", &err),
                     IB_ERR_INVALID_ARG);
    CHECK(ib__recorder_mark_owned_checked(r, marked, NULL, NULL, 0, "A", &err));

    /* the other entry points keep checking every key */
    ib_marker_key bad = {"chk", "6BA7B8109DAD41D180B400C04FD430C8"};
    assert_int_equal(ib__recorder_acquire_fp(r, info, &bad, NULL, 1, &req_a, &err),
                     IB_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "event id"));
    assert_int_equal(ib_recorder_acquire_batch(r, info, &bad, 1, &req_a, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib__recorder_mark_owned_fp(r, marked, &bad, NULL, 1, "A", &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib_recorder_mark_owned_batch(r, marked, &bad, 1, "A", &err),
                     IB_ERR_INVALID_ARG);
    ib_marker_key no_consumer = {"", ids[0]};
    assert_int_equal(ib_recorder_mark_owned_batch(r, marked, &no_consumer, 1, "A", &err),
                     IB_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "consumer"));
}

/* --- payload fingerprints ----------------------------------------------- */

/* Fingerprints that differ in their top bits (the memory kind compares 16
 * of them) and one with the top bit set (negative as an SQLite INTEGER). */
#define FP_A 0x1111000000000001ull
#define FP_B 0x2222000000000002ull
#define FP_HIGH 0xf00d00000000000full

/* The state of one key claimed with fingerprint `fp` (0 = none). */
static ib_claim_state acquire_fp(ib_recorder *r, const char *id, uint64_t fp)
{
    ib_marker_key key = {"fp", id};
    ib_claim_request req = {.owner = "A", .lease_ms = LEASE};
    ib_claim_info info;
    memset(&info, 0xff, sizeof(info));
    CHECK(ib__recorder_acquire_fp(r, &info, &key, &fp, 1, &req, &err));
    return info.state;
}

/* Claims and marks one key with `fps` (NULL = none) as the host does. */
static void mark_fp(ib_recorder *r, const char *id, const uint64_t *fps)
{
    ib_marker_key key = {"fp", id};
    ib_claim_request req = {.owner = "A", .lease_ms = LEASE};
    ib_claim_info info;
    bool marked = false;
    CHECK(ib__recorder_acquire_fp(r, &info, &key, fps, 1, &req, &err));
    assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
    CHECK(ib__recorder_mark_owned_fp(r, &marked, &key, fps, 1, "A", &err));
    assert_true(marked);
}

CONTRACT(test_fingerprints_catch_reused_ids)
{
    char a[IB_ID_BUF_SIZE], none[IB_ID_BUF_SIZE], zero[IB_ID_BUF_SIZE], high[IB_ID_BUF_SIZE];
    rt_id(a, 7000);
    rt_id(none, 7001);
    rt_id(zero, 7002);
    rt_id(high, 7003);
    uint64_t fp_a = FP_A, fp_zero = 0, fp_high = FP_HIGH;
    mark_fp(r, a, &fp_a);
    mark_fp(r, none, NULL);
    mark_fp(r, zero, &fp_zero);
    mark_fp(r, high, &fp_high);
    /* same content: done; other content: conflict */
    assert_int_equal(acquire_fp(r, a, FP_A), IB_CLAIM_DONE);
    assert_int_equal(acquire_fp(r, a, FP_B), IB_CLAIM_CONFLICT);
    assert_int_equal(acquire_fp(r, high, FP_HIGH), IB_CLAIM_DONE);
    assert_int_equal(acquire_fp(r, high, FP_HIGH & ~(1ull << 63)), IB_CLAIM_CONFLICT);
    /* no fingerprint on either side matches anything */
    assert_int_equal(acquire_fp(r, a, 0), IB_CLAIM_DONE);
    assert_int_equal(acquire_fp(r, none, FP_B), IB_CLAIM_DONE);
    assert_int_equal(acquire_fp(r, zero, FP_B), IB_CLAIM_DONE);
    ib_marker_key key = {"fp", a};
    ib_claim_request req = {.owner = "A", .lease_ms = LEASE};
    ib_claim_info info;
    CHECK(ib__recorder_acquire_fp(r, &info, &key, NULL, 1, &req, &err));
    assert_int_equal(info.state, IB_CLAIM_DONE);
    /* the public call passes none, so it never answers CONFLICT */
    CHECK(ib_recorder_acquire_batch(r, &info, &key, 1, &req, &err));
    assert_int_equal(info.state, IB_CLAIM_DONE);
    /* a later mark keeps the first marker's fingerprint */
    bool marked = false;
    uint64_t fp_b = FP_B;
    CHECK(ib__recorder_mark_owned_fp(r, &marked, &key, &fp_b, 1, "A", &err));
    assert_true(marked);
    assert_int_equal(acquire_fp(r, a, FP_A), IB_CLAIM_DONE);
    assert_int_equal(acquire_fp(r, a, FP_B), IB_CLAIM_CONFLICT);
    /* a seed-protocol mark stores none */
    CHECK(ib_recorder_mark(r, "fp", a, &err));
    CHECK(ib_recorder_mark(r, "fp2", a, &err));
    key.consumer = "fp2";
    CHECK(ib__recorder_acquire_fp(r, &info, &key, &fp_b, 1, &req, &err));
    assert_int_equal(info.state, IB_CLAIM_DONE);
}

CONTRACT(test_fingerprints_in_a_batch)
{
    char ids[4][IB_ID_BUF_SIZE];
    ib_marker_key keys[4];
    for (int i = 0; i < 4; i++) {
        rt_id(ids[i], 7100 + (uint64_t)i);
        keys[i] = (ib_marker_key){"fpb", ids[i]};
    }
    uint64_t fps[4] = {FP_A, FP_B, 0, FP_A};
    ib_claim_request req = {.owner = "A", .lease_ms = LEASE};
    ib_claim_info info[4];
    bool marked[4];
    CHECK(ib__recorder_acquire_fp(r, info, keys, fps, 3, &req, &err));
    CHECK(ib__recorder_mark_owned_fp(r, marked, keys, fps, 3, "A", &err));
    /* ids[3] is new: acquired whatever its fingerprint */
    uint64_t again[4] = {FP_A, FP_A, FP_B, FP_B};
    CHECK(ib__recorder_acquire_fp(r, info, keys, again, 4, &req, &err));
    assert_int_equal(info[0].state, IB_CLAIM_DONE);
    assert_int_equal(info[1].state, IB_CLAIM_CONFLICT);
    assert_int_equal(info[2].state, IB_CLAIM_DONE);
    assert_int_equal(info[3].state, IB_CLAIM_ACQUIRED);
}

/* Spends a whole budget of `max` attempts on (consumer, id), each by its
 * own owner and released, as a failing handler would. */
static void spend_attempts(ib_recorder *r, const char *consumer, const char *id, uint32_t max)
{
    char owner[16];
    for (uint32_t k = 0; k < max; k++) {
        snprintf(owner, sizeof(owner), "spend%u", k);
        ib_claim_info i = acquire(r, consumer, id, owner, LEASE, max);
        assert_int_equal(i.state, IB_CLAIM_ACQUIRED);
        assert_int_equal(i.attempts, ib_recorder_has_durable_attempts(r) ? k + 1 : 1);
        CHECK(ib_recorder_release(r, consumer, id, owner, &err));
    }
}

/* Issue 22: a dead letter ends the attempts. After end_attempts the same
 * id starts with a fresh budget, and spends it again to EXHAUSTED: a
 * poison event is still stopped after max attempts each time it comes
 * back. A marked key stays marked. */
CONTRACT(test_end_attempts_gives_a_fresh_budget)
{
    char id[IB_ID_BUF_SIZE], done[IB_ID_BUF_SIZE];
    rt_id(id, 8000);
    rt_id(done, 8001);
    ib_marker_key keys[2] = {{"dl", id}, {"dl", done}};
    CHECK(ib_recorder_mark(r, "dl", done, &err));
    /* an empty batch and keys never claimed are no work */
    CHECK(ib_recorder_end_attempts(r, keys, 0, &err));
    CHECK(ib_recorder_end_attempts(r, keys, 2, &err));
    for (int round = 0; round < 3; round++) {
        spend_attempts(r, "dl", id, 3);
        if (ib_recorder_has_durable_attempts(r))
            assert_int_equal(acquire(r, "dl", id, "late", LEASE, 3).state, IB_CLAIM_EXHAUSTED);
        CHECK(ib_recorder_end_attempts(r, keys, 2, &err));
        ib_claim_info fresh = acquire(r, "dl", id, "fresh", LEASE, 3);
        assert_int_equal(fresh.state, IB_CLAIM_ACQUIRED);
        assert_int_equal(fresh.attempts, 1);
        CHECK(ib_recorder_release(r, "dl", id, "fresh", &err));
        CHECK(ib_recorder_end_attempts(r, keys, 1, &err));
        assert_true(processed(r, "dl", done));
        assert_false(processed(r, "dl", id));
    }
    /* a bad key is refused whole */
    ib_marker_key bad[1] = {{"dl", "not-an-id"}};
    assert_int_equal(ib_recorder_end_attempts(r, bad, 1, &err), IB_ERR_INVALID_ARG);
}

/* A live claim keeps its holder and lease through end_attempts: only the
 * count goes. */
CONTRACT(test_end_attempts_keeps_a_live_claim)
{
    char id[IB_ID_BUF_SIZE];
    ib_marker_state s;
    rt_id(id, 8100);
    ib_marker_key key = {"lc", id};
    assert_int_equal(acquire(r, "lc", id, "A", LEASE, 5).state, IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_end_attempts(r, &key, 1, &err));
    assert_int_equal(acquire(r, "lc", id, "B", LEASE, 5).state, IB_CLAIM_BUSY);
    CHECK(ib_recorder_inspect(r, &s, "lc", id, &err));
    assert_string_equal(s.owner, "A");
    assert_int_equal(s.attempts, 0);
    assert_int_equal(s.lease_left_ms, LEASE);
}

/* inspect shows each state lookup could not: claimed (by whom, for how
 * long), attempts used, marked. */
CONTRACT(test_inspect_shows_claim_and_attempts)
{
    char id[IB_ID_BUF_SIZE], none[IB_ID_BUF_SIZE];
    ib_marker_state s;
    rt_id(id, 8200);
    rt_id(none, 8201);
    CHECK(ib_recorder_inspect(r, &s, "in", none, &err));
    assert_false(s.marked);
    assert_string_equal(s.owner, "");
    assert_int_equal(s.attempts, 0);
    assert_int_equal(acquire(r, "in", id, "A", LEASE, 5).state, IB_CLAIM_ACQUIRED);
    rt_clock_advance(1000);
    CHECK(ib_recorder_inspect(r, &s, "in", id, &err));
    assert_false(s.marked);
    assert_string_equal(s.owner, "A");
    assert_int_equal(s.lease_left_ms, LEASE - 1000);
    assert_int_equal(s.attempts, 1);
    CHECK(ib_recorder_mark(r, "in", id, &err));
    CHECK(ib_recorder_inspect(r, &s, "in", id, &err));
    assert_true(s.marked);
    assert_int_equal(s.ts_ms, T0 + 1000);
    assert_int_equal(s.attempts, 0);
}

/* forget clears the attempts too, marked or not, so a republish after it
 * runs with a whole budget. */
CONTRACT(test_forget_clears_attempts)
{
    char id[IB_ID_BUF_SIZE], marked_id[IB_ID_BUF_SIZE];
    bool existed = true;
    rt_id(id, 8300);
    rt_id(marked_id, 8301);
    spend_attempts(r, "fg", id, 2);
    CHECK(ib_recorder_forget(r, &existed, "fg", id, &err));
    assert_false(existed);
    ib_claim_info i = acquire(r, "fg", id, "X", LEASE, 2);
    assert_int_equal(i.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(i.attempts, 1);
    /* attempts spent, then marked by hand, then forgotten */
    spend_attempts(r, "fg", marked_id, 2);
    CHECK(ib_recorder_mark(r, "fg", marked_id, &err));
    CHECK(ib_recorder_forget(r, &existed, "fg", marked_id, &err));
    assert_true(existed);
    i = acquire(r, "fg", marked_id, "Y", LEASE, 2);
    assert_int_equal(i.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(i.attempts, 1);
}

/* attempt_stats counts keys attempted and not ended, and the exhausted
 * ones among them; a dead letter (end_attempts) or a mark takes them out. */
CONTRACT(test_attempt_stats_counts_exhausted)
{
    char a[IB_ID_BUF_SIZE], b[IB_ID_BUF_SIZE], c[IB_ID_BUF_SIZE];
    ib_attempt_stats st;
    rt_id(a, 8400);
    rt_id(b, 8401);
    rt_id(c, 8402);
    CHECK(ib_recorder_attempt_stats(r, &st, 3, &err));
    assert_int_equal(st.attempted, 0);
    assert_int_equal(st.exhausted, 0);
    assert_int_equal(ib_recorder_attempt_stats(r, &st, 0, &err), IB_ERR_INVALID_ARG);
    if (!ib_recorder_has_durable_attempts(r)) {
        /* memory keeps attempts only while a claim is held */
        assert_int_equal(acquire(r, "as", a, "A", LEASE, 3).state, IB_CLAIM_ACQUIRED);
        CHECK(ib_recorder_attempt_stats(r, &st, 1, &err));
        assert_int_equal(st.attempted, 1);
        assert_int_equal(st.exhausted, 1);
        return;
    }
    spend_attempts(r, "as", a, 3);
    spend_attempts(r, "as", b, 1);
    spend_attempts(r, "as", c, 3);
    CHECK(ib_recorder_mark(r, "as", c, &err));
    CHECK(ib_recorder_attempt_stats(r, &st, 3, &err));
    assert_int_equal(st.attempted, 2);
    assert_int_equal(st.exhausted, 1);
    ib_marker_key key = {"as", a};
    CHECK(ib_recorder_end_attempts(r, &key, 1, &err));
    CHECK(ib_recorder_attempt_stats(r, &st, 3, &err));
    assert_int_equal(st.attempted, 1);
    assert_int_equal(st.exhausted, 0);
}

/* The summary of one consumer of `v` (n entries), or fails. */
static const ib__consumer_summary *summary_of(const ib__consumer_summary *v, size_t n,
                                              const char *consumer)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].consumer, consumer) == 0)
            return &v[i];
    fail_msg("no summary of %s", consumer);
    return NULL;
}

/* summarize (ibus status): per consumer, sorted, the markers with their
 * oldest and newest, the claims held with the shortest lease left (negative
 * once ended) and its holder, and the attempted and exhausted keys; a mark
 * takes a key out of the claims. */
CONTRACT(test_summaries_by_consumer)
{
    char a1[IB_ID_BUF_SIZE], a2[IB_ID_BUF_SIZE], b1[IB_ID_BUF_SIZE], b2[IB_ID_BUF_SIZE],
        c1[IB_ID_BUF_SIZE];
    ib__consumer_summary *v = (ib__consumer_summary *)&v;
    size_t n = 99;
    rt_id(a1, 8500);
    rt_id(a2, 8501);
    rt_id(b1, 8502);
    rt_id(b2, 8503);
    rt_id(c1, 8504);
    CHECK(ib__recorder_summarize(r, &v, &n, 3, &err));
    assert_null(v);
    assert_int_equal(n, 0);
    assert_int_equal(ib__recorder_summarize(r, &v, &n, 0, &err), IB_ERR_INVALID_ARG);

    CHECK(ib_recorder_mark(r, "sum/a", a1, &err));
    rt_clock_advance(1000);
    CHECK(ib_recorder_mark(r, "sum/a", a2, &err));
    assert_int_equal(acquire(r, "sum/b", b1, "holder-1", LEASE, 3).state, IB_CLAIM_ACQUIRED);
    rt_clock_advance(2000);
    assert_int_equal(acquire(r, "sum/b", b2, "holder-2", LEASE, 3).state, IB_CLAIM_ACQUIRED);
    bool durable = ib_recorder_has_durable_attempts(r);
    if (durable)
        spend_attempts(r, "sum/c", c1, 3);
    CHECK(ib__recorder_summarize(r, &v, &n, 3, &err));
    assert_int_equal(n, durable ? 3 : 2);
    assert_string_equal(v[0].consumer, "sum/a");
    assert_string_equal(v[1].consumer, "sum/b");
    const ib__consumer_summary *sa = summary_of(v, n, "sum/a"), *sb = summary_of(v, n, "sum/b");
    assert_int_equal(sa->markers, 2);
    assert_int_equal(sa->oldest_ms, T0);
    assert_int_equal(sa->newest_ms, T0 + 1000);
    assert_int_equal(sa->claims, 0);
    assert_int_equal(sb->markers, 0);
    assert_int_equal(sb->oldest_ms, 0);
    assert_int_equal(sb->claims, 2);
    assert_int_equal(sb->claims_ended, 0);
    assert_int_equal(sb->lease_left_min_ms, LEASE - 2000);
    assert_string_equal(sb->lease_left_min_owner, "holder-1");
    assert_int_equal(sb->attempted, 2);
    assert_int_equal(sb->exhausted, 0);
    if (durable) {
        const ib__consumer_summary *sc = summary_of(v, n, "sum/c");
        assert_int_equal(sc->claims, 0);
        assert_int_equal(sc->attempted, 1);
        assert_int_equal(sc->exhausted, 1);
    }
    ib__consumer_summaries_free(v, n);

    /* a prune of nothing moves sqlite's journal into its tables: the rest
     * reads both (kv has no prune) */
    ib_status pst = ib_recorder_prune(r, NULL, 1, &err);
    assert_true(pst == IB_OK || pst == IB_ERR_UNSUPPORTED);
    /* one lease ended 5 s ago; the other key marked: no longer a claim */
    rt_clock_advance(LEASE - 2000 + 5000);
    CHECK(ib_recorder_mark(r, "sum/b", b2, &err));
    CHECK(ib__recorder_summarize(r, &v, &n, 1, &err));
    sb = summary_of(v, n, "sum/b");
    assert_int_equal(sb->markers, 1);
    assert_int_equal(sb->claims, 1);
    assert_int_equal(sb->claims_ended, 1);
    assert_int_equal(sb->lease_left_min_ms, -5000);
    assert_string_equal(sb->lease_left_min_owner, "holder-1");
    assert_int_equal(sb->attempted, 1);
    assert_int_equal(sb->exhausted, 1);
    ib__consumer_summaries_free(v, n);
    ib__consumer_summaries_free(NULL, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_unmarked_is_not_processed),
    cmocka_unit_test(test_mark_then_processed),
    cmocka_unit_test(test_mark_twice_harmless),
    cmocka_unit_test(test_consumers_independent),
    cmocka_unit_test(test_invalid_keys_refused),
    cmocka_unit_test(test_batch_agrees_with_single),
    cmocka_unit_test(test_claim_free_then_same_owner_extends),
    cmocka_unit_test(test_claim_other_owner_busy),
    cmocka_unit_test(test_claim_after_mark_done),
    cmocka_unit_test(test_release_frees),
    cmocka_unit_test(test_release_batch_frees),
    cmocka_unit_test(test_expired_lease_taken_over),
    cmocka_unit_test(test_claim_batch_states),
    cmocka_unit_test(test_concurrent_claim_one_winner),
    cmocka_unit_test(test_concurrent_marks_all_kept),
    cmocka_unit_test(test_lookup_and_forget),
    cmocka_unit_test(test_prune_removes_only_old),
    cmocka_unit_test(test_list_newest_first),
    cmocka_unit_test(test_stats_counts),
    cmocka_unit_test(test_acquire_counts_attempts_and_exhausts),
    cmocka_unit_test(test_attempts_counted_as_calls_start),
    cmocka_unit_test(test_renew_and_mark_are_fenced),
    cmocka_unit_test(test_checked_entry_points),
    cmocka_unit_test(test_fingerprints_catch_reused_ids),
    cmocka_unit_test(test_fingerprints_in_a_batch),
    cmocka_unit_test(test_end_attempts_gives_a_fresh_budget),
    cmocka_unit_test(test_end_attempts_keeps_a_live_claim),
    cmocka_unit_test(test_inspect_shows_claim_and_attempts),
    cmocka_unit_test(test_forget_clears_attempts),
    cmocka_unit_test(test_attempt_stats_counts_exhausted),
    cmocka_unit_test(test_summaries_by_consumer),
};

IB_TEST_MAIN(tests)
