/* SPDX-License-Identifier: Apache-2.0 */
/* Partition leases (issue 47, item 3; recorders/include/partition_lease.h)
 * against a real nats-server:
 *  - a lease's life: taken, held against another owner, renewed, given
 *    back and taken by the other, whose old holder's renewal is then
 *    refused; a lease past its end is taken over by the next epoch;
 *  - eight processes' connections racing for each of 20 fresh partitions:
 *    exactly one wins each, and the others learn who;
 *  - a newest epoch another tool wrote (a value that is not a lease, or a
 *    deleted key) is never taken as free;
 *  - the moment an owner stops starting handlers: a quarter of the lease
 *    (at least 1 s) before its end;
 *  - the members a process reads: announced within the lease, not the
 *    stale, the departed or another tool's values, whatever else the
 *    bucket holds; the owners rendezvous hashing gives over that list. */
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "fleet_members.h"
#include "partition_lease.h"
#include "rendezvous.h"

#define BUCKET "IBPO_orders"
#define RACERS 8
#define RACED 20

typedef struct conn {
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
} conn;

static void conn_open(conn *c, it_env *e, bool create)
{
    memset(c, 0, sizeof(*c));
    assert_int_equal(natsConnection_ConnectTo(&c->nc, e->server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&c->js, c->nc, NULL), NATS_OK);
    if (create) {
        kvConfig cfg;
        kvConfig_Init(&cfg);
        cfg.Bucket = BUCKET;
        cfg.History = 1;
        assert_int_equal(js_CreateKeyValue(&c->kv, c->js, &cfg), NATS_OK);
    } else {
        assert_int_equal(js_KeyValue(&c->kv, c->js, BUCKET), NATS_OK);
    }
}

static void conn_close(conn *c)
{
    kvStore_Destroy(c->kv);
    jsCtx_Destroy(c->js);
    natsConnection_Destroy(c->nc);
}

static ib_lease_result take(conn *c, uint32_t p, const char *owner, int64_t lease_ms, int64_t now,
                            ib_lease_state *st)
{
    ib_lease_result r = 0;
    ib_error err = {0};
    if (ib_partition_lease_take(c->kv, c->js, BUCKET, p, owner, lease_ms, now, &r, st, &err) !=
        IB_OK)
        fail_msg("take: %s", err.msg);
    return r;
}

static ib_lease_result renew(conn *c, uint32_t p, const ib_lease_state *held, int64_t lease_ms,
                             int64_t now, ib_lease_state *st)
{
    ib_lease_result r = 0;
    ib_error err = {0};
    if (ib_partition_lease_renew(c->kv, c->js, BUCKET, p, held, lease_ms, now, &r, st, &err) !=
        IB_OK)
        fail_msg("renew: %s", err.msg);
    return r;
}

static void test_a_lease_from_take_to_takeover(void **state)
{
    it_env *e = *state;
    conn c;
    conn_open(&c, e, true);
    const int64_t t = 1800000000000, lease = 30000;
    ib_lease_state a, b, s;

    assert_int_equal(take(&c, 3, "proc-a", lease, t, &a), IB_LEASE_OURS);
    assert_int_equal(a.epoch, 1);
    assert_string_equal(a.owner, "proc-a");
    assert_int_equal(a.end_ms, t + lease);
    assert_int_equal(take(&c, 3, "proc-b", lease, t + 1000, &s), IB_LEASE_HELD);
    assert_string_equal(s.owner, "proc-a");
    assert_int_equal(s.end_ms, t + lease);

    assert_int_equal(renew(&c, 3, &a, lease, t + 10000, &a), IB_LEASE_OURS);
    assert_int_equal(a.epoch, 2);
    assert_int_equal(a.end_ms, t + 10000 + lease);
    ib_lease_state old = a;
    assert_int_equal(renew(&c, 3, &a, 0, t + 11000, &a), IB_LEASE_OURS); /* given back */
    assert_int_equal(a.epoch, 3);
    assert_int_equal(a.end_ms, 0);
    assert_int_equal(take(&c, 3, "proc-b", lease, t + 11500, &b), IB_LEASE_OURS);
    assert_int_equal(b.epoch, 4);
    assert_int_equal(renew(&c, 3, &old, lease, t + 12000, &s), IB_LEASE_LOST);
    assert_string_equal(s.owner, "proc-b");

    /* proc-b stops renewing: past its end, proc-a takes the next epoch,
     * and proc-b's late renewal is refused */
    assert_int_equal(take(&c, 3, "proc-a", lease, b.end_ms - 1, &s), IB_LEASE_HELD);
    assert_int_equal(take(&c, 3, "proc-a", lease, b.end_ms + 1, &a), IB_LEASE_OURS);
    assert_int_equal(a.epoch, 5);
    assert_int_equal(renew(&c, 3, &b, lease, b.end_ms + 2, &s), IB_LEASE_LOST);
    assert_int_equal(s.epoch, 5);
    /* another partition is its own */
    assert_int_equal(take(&c, 4, "proc-b", lease, t, &s), IB_LEASE_OURS);
    assert_int_equal(s.epoch, 1);

    assert_int_equal(ib_partition_lease_stop_at(100, 30000), 100 + 22500);
    assert_int_equal(ib_partition_lease_stop_at(100, 2000), 100 + 1000);
    assert_int_equal(ib_partition_lease_stop_at(100, 1000), 100 + 500);
    conn_close(&c);
    it_done(e);
}

typedef struct racer {
    it_env *e;
    int index;
    pthread_barrier_t *start;
    ib_lease_result results[RACED];
    ib_lease_state seen[RACED];
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    conn c;
    conn_open(&c, r->e, false);
    char owner[32];
    snprintf(owner, sizeof(owner), "racer-%d", r->index);
    for (uint32_t p = 0; p < RACED; p++) {
        pthread_barrier_wait(r->start);
        ib_error err = {0};
        if (ib_partition_lease_take(c.kv, c.js, BUCKET, 100 + p, owner, 30000, 1800000000000,
                                    &r->results[p], &r->seen[p], &err) != IB_OK)
            r->results[p] = 0;
    }
    conn_close(&c);
    return NULL;
}

static void test_racers_one_winner_each(void **state)
{
    it_env *e = *state;
    conn c;
    conn_open(&c, e, true);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    racer racers[RACERS];
    pthread_t threads[RACERS];
    for (int i = 0; i < RACERS; i++) {
        racers[i] = (racer){.e = e, .index = i, .start = &start};
        assert_int_equal(pthread_create(&threads[i], NULL, race, &racers[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    for (uint32_t p = 0; p < RACED; p++) {
        int winners = 0;
        char winner[32] = "";
        for (int i = 0; i < RACERS; i++) {
            ib_lease_result r = racers[i].results[p];
            assert_true(r == IB_LEASE_OURS || r == IB_LEASE_LOST || r == IB_LEASE_HELD);
            if (r == IB_LEASE_OURS) {
                winners++;
                snprintf(winner, sizeof(winner), "racer-%d", i);
            }
        }
        assert_int_equal(winners, 1);
        ib_lease_state s;
        ib_error err = {0};
        assert_int_equal(ib_partition_lease_read(c.js, BUCKET, 100 + p, &s, &err), IB_OK);
        assert_int_equal(s.epoch, 1);
        assert_string_equal(s.owner, winner);
        for (int i = 0; i < RACERS; i++)
            if (racers[i].results[p] != IB_LEASE_OURS)
                assert_string_equal(racers[i].seen[p].owner, winner);
    }
    conn_close(&c);
    it_done(e);
}

static void test_foreign_epochs_are_not_free(void **state)
{
    it_env *e = *state;
    conn c;
    conn_open(&c, e, true);
    uint64_t rev = 0;
    ib_lease_state s;
    ib_lease_result r = 0;
    ib_error err = {0};
    static const char *const junk[] = {"hello", "ibus-lease v1 a b", "ibus-lease v1 has\ttab 5",
                                       "ibus-lease v1 x 99999999999999999999", "ibus-lease v2 x 5"};
    for (uint32_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        char key[32];
        snprintf(key, sizeof(key), "p.%u.1", 20 + i);
        assert_int_equal(kvStore_PutString(&rev, c.kv, key, junk[i]), NATS_OK);
        assert_int_equal(ib_partition_lease_read(c.js, BUCKET, 20 + i, &s, &err), IB_ERR_RECORDER);
        it_assert_contains(err.msg, "not taken");
        assert_int_equal(ib_partition_lease_take(c.kv, c.js, BUCKET, 20 + i, "proc-a", 30000,
                                                 1800000000000, &r, &s, &err),
                         IB_ERR_RECORDER);
    }
    /* a lease whose newest epoch was deleted */
    assert_int_equal(take(&c, 30, "proc-a", 30000, 1800000000000, &s), IB_LEASE_OURS);
    assert_int_equal(kvStore_Delete(c.kv, "p.30.1"), NATS_OK);
    assert_int_equal(ib_partition_lease_read(c.js, BUCKET, 30, &s, &err), IB_ERR_RECORDER);
    conn_close(&c);
    it_done(e);
}

static void test_members_are_the_live_announcements(void **state)
{
    it_env *e = *state;
    conn c;
    conn_open(&c, e, true);
    const int64_t t = 1800000000000, lease = 30000;
    ib_error err = {0};
    static ib_fleet_list list;
    uint64_t rev = 0;

    assert_int_equal(ib_fleet_members(c.js, BUCKET, t, lease, &list, &err), IB_OK);
    assert_int_equal(list.count, 0); /* nobody yet */
    const char *live[] = {"orders@node-a-1-5f3e", "orders@node-b-1-99a0", "orders@node-c-7-0001"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(ib_fleet_announce(c.kv, live[i], t - 1000 * i, &err), IB_OK);
    assert_int_equal(ib_fleet_announce(c.kv, "orders@killed-1-aaaa", t - lease - 1, &err), IB_OK);
    assert_int_equal(ib_fleet_announce(c.kv, "orders@left-1-bbbb", t, &err), IB_OK);
    assert_int_equal(ib_fleet_leave(c.kv, "orders@left-1-bbbb", &err), IB_OK);
    assert_int_equal(kvStore_PutString(&rev, c.kv, "m.tool", "hello"), NATS_OK);
    /* a value copied under another key: not that key's member */
    assert_int_equal(kvStore_PutString(&rev, c.kv, "m.00", "ibus-member v1 1800000000000 x"),
                     NATS_OK);
    assert_int_equal(ib_fleet_announce(c.kv, "bad.token", t, &err), IB_ERR_INVALID_ARG);
    /* leases beside them are not members */
    ib_lease_state s;
    for (uint32_t p = 0; p < 16; p++)
        assert_int_equal(take(&c, p, live[0], lease, t, &s), IB_LEASE_OURS);
    /* a member announces again: its newest announcement counts */
    assert_int_equal(ib_fleet_announce(c.kv, live[2], t, &err), IB_OK);

    assert_int_equal(ib_fleet_members(c.js, BUCKET, t, lease, &list, &err), IB_OK);
    assert_int_equal(list.count, 3);
    assert_int_equal(list.stale, 1);
    assert_int_equal(list.foreign, 2);
    for (int i = 0; i < 3; i++) {
        bool found = false;
        for (size_t k = 0; k < list.count; k++)
            found |= strcmp(list.at[k], live[i]) == 0;
        assert_true(found);
    }
    /* every partition has an owner among them, the same whoever computes it */
    size_t owned[3] = {0};
    for (uint32_t p = 0; p < 64; p++) {
        size_t o = ib_rendezvous_owner(list.at, list.count, p);
        assert_true(o < list.count);
        for (int i = 0; i < 3; i++)
            owned[i] += strcmp(list.at[o], live[i]) == 0;
    }
    assert_true(owned[0] > 0 && owned[1] > 0 && owned[2] > 0);
    assert_int_equal(owned[0] + owned[1] + owned[2], 64);
    conn_close(&c);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_members_are_the_live_announcements, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(test_a_lease_from_take_to_takeover, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(test_racers_one_winner_each, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(test_foreign_epochs_are_not_free, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
