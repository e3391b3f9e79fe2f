/* SPDX-License-Identifier: Apache-2.0 */
/* memory: capacity bound and eviction order, compactness, and a randomised
 * run against a plain reference model that drives the ring through growth,
 * holes, compaction, eviction and pruning. */
#include "ib_test.h"
#include "rtest.h"

static ib_error err;

static ib_recorder *open_memory(const char *uri)
{
    ib_recorder *r = NULL;
    ib_recorder_options o = {.size = sizeof(o), .now_ms = rt_clock};
    CHECK(ib_recorder_open(&r, uri, &o, &err));
    assert_string_equal(ib_recorder_kind(r), "memory");
    return r;
}

static bool processed(ib_recorder *r, const char *consumer, uint64_t n)
{
    char id[IB_ID_BUF_SIZE];
    bool p = false;
    rt_id(id, n);
    CHECK(ib_recorder_is_processed(r, &p, consumer, id, &err));
    return p;
}

static void mark(ib_recorder *r, const char *consumer, uint64_t n)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, n);
    CHECK(ib_recorder_mark(r, consumer, id, &err));
}

static uint64_t markers(ib_recorder *r)
{
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    return s.markers;
}

static void test_capacity_evicts_oldest_exactly(void **state)
{
    (void)state;
    rt_clock_set(1000);
    ib_recorder *r = open_memory("memory:?capacity=100");
    for (uint64_t i = 0; i < 250; i++) {
        mark(r, i % 2 ? "a" : "b", i);
        rt_clock_advance(1);
        assert_int_equal(markers(r), i < 100 ? i + 1 : 100);
    }
    for (uint64_t i = 0; i < 250; i++)
        assert_int_equal(processed(r, i % 2 ? "a" : "b", i), i >= 150);
    /* Re-marking a kept marker does not refresh its age... */
    mark(r, "b", 150);
    mark(r, "a", 1000);
    assert_false(processed(r, "b", 150));
    assert_true(processed(r, "a", 151));
    assert_true(processed(r, "a", 1000));
    /* ...and an evicted one comes back as the newest. */
    mark(r, "b", 0);
    assert_false(processed(r, "a", 151));
    assert_true(processed(r, "b", 0));
    assert_int_equal(markers(r), 100);
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.oldest_ts_ms, 1000 + 152);
    ib_recorder_close(r);
}

static void test_capacity_forget_makes_room(void **state)
{
    (void)state;
    ib_recorder *r = open_memory("memory:?capacity=10");
    char id[IB_ID_BUF_SIZE];
    bool existed = false;
    for (uint64_t i = 0; i < 10; i++)
        mark(r, "c", i);
    rt_id(id, 5);
    CHECK(ib_recorder_forget(r, &existed, "c", id, &err));
    assert_true(existed);
    assert_int_equal(markers(r), 9);
    /* A free place: nothing is evicted. */
    mark(r, "c", 10);
    assert_int_equal(markers(r), 10);
    assert_true(processed(r, "c", 0));
    /* Full again: the oldest goes. */
    mark(r, "c", 11);
    assert_false(processed(r, "c", 0));
    assert_true(processed(r, "c", 1));
    assert_int_equal(markers(r), 10);
    ib_recorder_close(r);
}

static void test_capacity_one(void **state)
{
    (void)state;
    ib_recorder *r = open_memory("memory:?capacity=1");
    for (uint64_t i = 0; i < 3000; i++) {
        mark(r, "c", i);
        assert_true(processed(r, "c", i));
        if (i > 0)
            assert_false(processed(r, "c", i - 1));
    }
    assert_int_equal(markers(r), 1);
    ib_recorder_close(r);
}

/* The compactness target: under 64 bytes a marker, everything counted. */
static void test_bytes_per_marker(void **state)
{
    (void)state;
    ib_recorder *r = open_memory("memory:");
    uint64_t n = 0;
    const uint64_t sizes[] = {10000, 100000, 300000, 1000000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint64_t target = rt_under_valgrind() ? sizes[k] / 10 : sizes[k];
        for (; n < target; n++)
            mark(r, "durable/plugin/handler", n);
        ib_recorder_stats s;
        CHECK(ib_recorder_stats_get(r, &s, &err));
        assert_int_equal(s.markers, target);
        double per = (double)s.storage_bytes / (double)s.markers;
        print_message("[ memory   ] %8llu markers: %.1f bytes/marker\n", (unsigned long long)target,
                      per);
        if (target >= 30000)
            assert_true(per < 64.0);
    }
    ib_recorder_close(r);
}

static void test_prune_gives_memory_back(void **state)
{
    (void)state;
    rt_clock_set(1000);
    ib_recorder *r = open_memory("memory:");
    uint64_t n = rt_scale(200000), keep = n / 100;
    uint64_t removed = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i == n - keep)
            rt_clock_set(5000);
        mark(r, "c", i);
    }
    ib_recorder_stats before, after;
    CHECK(ib_recorder_stats_get(r, &before, &err));
    CHECK(ib_recorder_prune(r, &removed, 5000, &err));
    assert_int_equal(removed, n - keep);
    CHECK(ib_recorder_stats_get(r, &after, &err));
    assert_int_equal(after.markers, keep);
    print_message("[ memory   ] %llu bytes before prune, %llu after\n",
                  (unsigned long long)before.storage_bytes,
                  (unsigned long long)after.storage_bytes);
    assert_true(after.storage_bytes * 10 < before.storage_bytes);
    for (uint64_t i = n - keep - 5; i < n; i++)
        assert_int_equal(processed(r, "c", i), i >= n - keep);
    /* And it keeps working. */
    mark(r, "c", 1);
    assert_true(processed(r, "c", 1));
    ib_recorder_close(r);
}

static void test_many_consumers(void **state)
{
    (void)state;
    ib_recorder *r = open_memory("memory:");
    char name[32];
    for (unsigned i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "durable/p/h%u", i);
        mark(r, name, i);
    }
    for (unsigned i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "durable/p/h%u", i);
        assert_true(processed(r, name, i));
        assert_false(processed(r, name, i + 1));
    }
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.consumers, 1000);
    ib_recorder_close(r);
}

static void test_many_claims(void **state)
{
    (void)state;
    rt_clock_set(1000);
    ib_recorder *r = open_memory("memory:");
    char id[IB_ID_BUF_SIZE];
    unsigned n = rt_scale(20000);
    ib_claim_state cs;
    uint64_t removed;
    for (unsigned i = 0; i < n; i++) {
        rt_id(id, i);
        CHECK(ib_recorder_claim(r, &cs, "c", id, i % 2 ? "A" : "B", 1000, &err));
        assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    }
    for (unsigned i = 0; i < n; i += 2) {
        rt_id(id, i);
        CHECK(ib_recorder_claim(r, &cs, "c", id, "A", 1000, &err));
        assert_int_equal(cs, IB_CLAIM_BUSY);
        CHECK(ib_recorder_release(r, "c", id, "B", &err));
    }
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.claims, n / 2);
    for (unsigned i = 1; i < n; i += 2) {
        rt_id(id, i);
        CHECK(ib_recorder_claim(r, &cs, "c", id, "B", 1000, &err));
        assert_int_equal(cs, IB_CLAIM_BUSY);
    }
    rt_clock_advance(1000);
    CHECK(ib_recorder_prune(r, &removed, 0, &err));
    assert_int_equal(removed, 0);
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.claims, 0);
    ib_recorder_close(r);
}

/* --- randomised run against a reference model -------------------------- */

#define UNIVERSE 600

typedef struct model {
    bool marked[2][UNIVERSE];
    int64_t ts[2][UNIVERSE];
    uint64_t seq[2][UNIVERSE];
    /* insertion order, for eviction: (consumer, id, seq) */
    struct {
        int c;
        int id;
        uint64_t seq;
    } order[200000];
    size_t head, tail;
    uint64_t next_seq;
    uint64_t live;
} model;

static uint64_t rng_state = 0x1234567887654321ULL;

static uint64_t rnd(uint64_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state % n;
}

static void model_mark(model *m, size_t capacity, int c, int id, int64_t now)
{
    if (m->marked[c][id])
        return;
    if (capacity != 0 && m->live == capacity) {
        for (;;) {
            assert_true(m->tail < m->head);
            int oc = m->order[m->tail].c, oi = m->order[m->tail].id;
            uint64_t os = m->order[m->tail].seq;
            m->tail++;
            if (m->marked[oc][oi] && m->seq[oc][oi] == os) {
                m->marked[oc][oi] = false;
                m->live--;
                break;
            }
        }
    }
    m->marked[c][id] = true;
    m->ts[c][id] = now;
    m->seq[c][id] = ++m->next_seq;
    assert_true(m->head < sizeof(m->order) / sizeof(m->order[0]));
    m->order[m->head].c = c;
    m->order[m->head].id = id;
    m->order[m->head].seq = m->next_seq;
    m->head++;
    m->live++;
}

static void run_model(size_t capacity, unsigned ops)
{
    static const char *const consumers[2] = {"x", "y"};
    static model m;
    char uri[64], id[IB_ID_BUF_SIZE];
    memset(&m, 0, sizeof(m));
    rt_clock_set(100000);
    snprintf(uri, sizeof(uri), capacity ? "memory:?capacity=%zu" : "memory:", capacity);
    ib_recorder *r = open_memory(uri);
    for (unsigned op = 0; op < ops; op++) {
        int c = (int)rnd(2), n = (int)rnd(UNIVERSE);
        uint64_t dice = rnd(100);
        /* Now and then the clock steps back, as an injected one may. */
        rt_clock_advance(rnd(10) == 0 ? -(int64_t)rnd(50) : (int64_t)rnd(5));
        rt_id(id, (uint64_t)n);
        if (dice < 55) {
            CHECK(ib_recorder_mark(r, consumers[c], id, &err));
            model_mark(&m, capacity, c, n, rt_clock());
        } else if (dice < 75) {
            bool existed = false;
            CHECK(ib_recorder_forget(r, &existed, consumers[c], id, &err));
            assert_int_equal(existed, m.marked[c][n]);
            if (m.marked[c][n])
                m.live--;
            m.marked[c][n] = false;
        } else if (dice < 77) {
            int64_t cut = rt_clock() - (int64_t)rnd(300);
            uint64_t removed = 0, expect = 0;
            CHECK(ib_recorder_prune(r, &removed, cut, &err));
            for (int cc = 0; cc < 2; cc++)
                for (int i = 0; i < UNIVERSE; i++)
                    if (m.marked[cc][i] && m.ts[cc][i] < cut) {
                        m.marked[cc][i] = false;
                        m.live--;
                        expect++;
                    }
            assert_int_equal(removed, expect);
        } else if (dice < 87) {
            ib_claim_state cs;
            CHECK(ib_recorder_claim(r, &cs, consumers[c], id, "me", 100, &err));
            assert_int_equal(cs, m.marked[c][n] ? IB_CLAIM_DONE : IB_CLAIM_ACQUIRED);
            if (cs == IB_CLAIM_ACQUIRED && rnd(2))
                CHECK(ib_recorder_release(r, consumers[c], id, "me", &err));
        } else {
            bool found = false;
            int64_t ts = 0;
            CHECK(ib_recorder_lookup(r, &found, &ts, consumers[c], id, &err));
            assert_int_equal(found, m.marked[c][n]);
            if (found)
                assert_int_equal(ts, m.ts[c][n]);
        }
        if (op % 500 == 0 || op == ops - 1) {
            for (int cc = 0; cc < 2; cc++)
                for (int i = 0; i < UNIVERSE; i++) {
                    bool p = false;
                    rt_id(id, (uint64_t)i);
                    CHECK(ib_recorder_is_processed(r, &p, consumers[cc], id, &err));
                    if (p != m.marked[cc][i])
                        fail_msg("op %u: %s/%d is %d, model says %d", op, consumers[cc], i, p,
                                 m.marked[cc][i]);
                }
            assert_int_equal(markers(r), m.live);
        }
    }
    ib_recorder_close(r);
}

static void test_model_unbounded(void **state)
{
    (void)state;
    run_model(0, rt_scale(60000));
}

static void test_model_capacity(void **state)
{
    (void)state;
    run_model(150, rt_scale(60000));
    run_model(1, rt_scale(5000));
    run_model(1100, rt_scale(60000));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_capacity_evicts_oldest_exactly),
    cmocka_unit_test(test_capacity_forget_makes_room),
    cmocka_unit_test(test_capacity_one),
    cmocka_unit_test(test_bytes_per_marker),
    cmocka_unit_test(test_prune_gives_memory_back),
    cmocka_unit_test(test_many_consumers),
    cmocka_unit_test(test_many_claims),
    cmocka_unit_test(test_model_unbounded),
    cmocka_unit_test(test_model_capacity),
};

IB_TEST_MAIN(tests)
