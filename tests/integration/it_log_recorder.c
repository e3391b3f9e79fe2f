/* SPDX-License-Identifier: Apache-2.0 */
/* The partitioned consumer's recorder (issue 47;
 * recorders/include/log_recorder.h) over a real marker log:
 *  - claims and marks follow the table, and a next owner that replays
 *    the log finds the marks, and the calls that never came back in
 *    flight (taken over) until they are released;
 *  - attempts counted by returned calls exhaust a key, and ENDED gives it
 *    a fresh budget, also after a replay;
 *  - a key of a partition not owned, or not routed, is answered BUSY,
 *    never marked, and its attempts cannot be ended here;
 *  - past the partition's stop time nothing new is decided (a claim is
 *    BUSY, a renewal finds the key not held) while a mark of a call that
 *    ran is still written;
 *  - an append the server does not acknowledge fails the call with
 *    IB_ERR_RECORDER and leaves the table as it was. */
#include <nats/nats.h>
#include <stdio.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "log_recorder.h"
#include "recorder_internal.h"
#include "uuid.h"

#define PARTITIONS 4
#define CONSUMER "orders/audit/audit"
#define OWNER "orders@test"

typedef struct fixture {
    natsConnection *nc;
    ib_marker_stream *log;
    ib_recorder *r;
    char ids[8][IB_ID_BUF_SIZE];
    ib_marker_key keys[8];
} fixture;

static void open_log(fixture *f, it_env *e)
{
    ib_error err = {0};
    assert_int_equal(natsConnection_ConnectTo(&f->nc, e->server.url), NATS_OK);
    ib_marker_stream_options o = {.stream = "IBUS_MARKERS_orders",
                                  .subject_base = "ibus.markers.orders",
                                  .durable = "orders",
                                  .partitions = PARTITIONS,
                                  .timeout_ms = it_timeout(2000),
                                  .attempts = 1};
    if (ib_marker_stream_open(&f->log, f->nc, &o, &err) != IB_OK)
        fail_msg("open: %s", err.msg);
    for (unsigned i = 0; i < 8; i++) {
        snprintf(f->ids[i], sizeof(f->ids[i]), "%08x000040008000%012x", i + 1, i * 7919u);
        f->keys[i] = (ib_marker_key){CONSUMER, f->ids[i]};
    }
}

/* A recorder that owns `partition` (its markers replayed from the log
 * under `epoch`) and routes every id of the fixture to it. */
static ib_recorder *owner_of(fixture *f, uint32_t partition, uint64_t epoch)
{
    ib_error err = {0};
    ib_recorder *r = NULL;
    ib_marker_table *t = NULL;
    assert_int_equal(ib_log_recorder_create(&r, f->log, PARTITIONS, &err), IB_OK);
    assert_int_equal(ib_marker_table_create(&t, &err), IB_OK);
    assert_int_equal(ib_marker_stream_replay(f->log, partition, t, NULL, &err), IB_OK);
    assert_int_equal(ib_log_recorder_own(r, partition, epoch, t, &err), IB_OK);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(ib_log_recorder_route(r, f->ids[i], partition, &err), IB_OK);
    return r;
}

static void close_fixture(fixture *f)
{
    ib_marker_stream_close(f->log);
    natsConnection_Destroy(f->nc);
}

/* The dispatch's claim: attempts deferred, the first key's counted. */
static ib_status claim(ib_recorder *r, ib_claim_info *out, bool *taken, const ib_marker_key *keys,
                       size_t n, uint32_t max_attempts)
{
    ib_claim_request req = {.owner = OWNER, .lease_ms = 30000, .max_attempts = max_attempts};
    ib__acquire_opts opts = {.defer_attempts = true, .count_key0 = true, .taken_over = taken};
    ib_error err = {0};
    return ib__recorder_acquire_checked(r, out, keys, NULL, n, &req, &opts, &err);
}

static void test_marks_and_calls_in_flight_outlive_the_owner(void **state)
{
    it_env *e = *state;
    fixture f;
    open_log(&f, e);
    ib_recorder *r = owner_of(&f, 1, 1);
    ib_claim_info info[8];
    bool taken[8], marked[8];
    ib_error err = {0};

    assert_int_equal(claim(r, info, taken, f.keys, 6, 0), IB_OK);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(info[i].state, IB_CLAIM_ACQUIRED);
        assert_false(taken[i]);
    }
    assert_int_equal(info[0].attempts, 1); /* the first key's call is counted as it starts */
    assert_int_equal(info[1].attempts, 0);
    /* four calls said OK; keys 4 and 5 are in flight when the owner dies */
    assert_int_equal(ib__recorder_mark_owned_checked(r, marked, f.keys, NULL, 4, OWNER, &err),
                     IB_OK);
    for (int i = 0; i < 4; i++)
        assert_true(marked[i]);
    assert_int_equal(claim(r, info, taken, f.keys, 1, 0), IB_OK);
    assert_int_equal(info[0].state, IB_CLAIM_DONE);
    ib_recorder_close(r); /* a kill -9: no release */

    r = owner_of(&f, 1, 2);
    assert_int_equal(claim(r, info, taken, f.keys, 7, 0), IB_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(info[i].state, IB_CLAIM_DONE);
    assert_int_equal(info[4].state, IB_CLAIM_ACQUIRED);
    assert_true(taken[4] && taken[5]); /* their calls never came back: run alone */
    assert_false(taken[6]);
    /* released (a RETRY counted as it is freed): no longer in flight */
    bool held[3], count[3] = {true, true, false};
    assert_int_equal(
        ib__recorder_count_attempts(r, held, f.keys + 4, count, 3, OWNER, 0, true, &err), IB_OK);
    assert_true(held[0] && held[1] && held[2]);
    ib_recorder_close(r);

    r = owner_of(&f, 1, 3);
    assert_int_equal(claim(r, info, taken, f.keys + 4, 3, 0), IB_OK);
    assert_false(taken[0] || taken[1] || taken[2]);
    assert_int_equal(info[0].attempts, 2); /* one counted in the claim, one now (key 0) */
    assert_int_equal(info[1].attempts, 1);
    assert_int_equal(info[2].attempts, 0);
    ib_recorder_close(r);
    close_fixture(&f);
}

static void test_counted_attempts_exhaust_and_end(void **state)
{
    it_env *e = *state;
    fixture f;
    open_log(&f, e);
    ib_recorder *r = owner_of(&f, 2, 1);
    ib_claim_info info;
    bool taken, held;
    ib_error err = {0};
    const ib_marker_key *key = &f.keys[7];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(claim(r, &info, &taken, key, 1, 3), IB_OK);
        assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
        /* the call returned RETRY; its count was taken at the claim (key 0) */
        assert_int_equal(
            ib__recorder_count_attempts(r, &held, key, (bool[]){false}, 1, OWNER, 0, true, &err),
            IB_OK);
    }
    assert_int_equal(claim(r, &info, &taken, key, 1, 3), IB_OK);
    assert_int_equal(info.state, IB_CLAIM_EXHAUSTED);
    assert_int_equal(info.attempts, 3);
    ib_recorder_close(r);

    r = owner_of(&f, 2, 2); /* the count is in the log */
    assert_int_equal(claim(r, &info, &taken, key, 1, 3), IB_OK);
    assert_int_equal(info.state, IB_CLAIM_EXHAUSTED);
    assert_int_equal(ib_recorder_end_attempts(r, key, 1, &err), IB_OK);
    assert_int_equal(claim(r, &info, &taken, key, 1, 3), IB_OK);
    assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
    ib_recorder_close(r);
    close_fixture(&f);
}

static void test_partitions_not_owned_decide_nothing(void **state)
{
    it_env *e = *state;
    fixture f;
    open_log(&f, e);
    ib_recorder *r = owner_of(&f, 0, 1);
    ib_error err = {0};
    assert_int_equal(ib_log_recorder_route(r, f.ids[1], 3, &err), IB_OK); /* not owned */
    ib_log_recorder_routes_clear(r);
    assert_int_equal(ib_log_recorder_route(r, f.ids[1], 3, &err), IB_OK);
    ib_claim_info info[2];
    bool taken[2], marked[2];
    /* key 0 is no longer routed after the clear; key 1 is routed to 3 */
    assert_int_equal(claim(r, info, taken, f.keys, 2, 0), IB_OK);
    assert_int_equal(info[0].state, IB_CLAIM_BUSY);
    assert_int_equal(info[1].state, IB_CLAIM_BUSY);
    assert_true(info[1].remaining_ms > 0);
    assert_int_equal(ib__recorder_mark_owned_checked(r, marked, f.keys, NULL, 2, OWNER, &err),
                     IB_OK);
    assert_false(marked[0] || marked[1]);
    assert_int_equal(ib_recorder_end_attempts(r, f.keys + 1, 1, &err), IB_ERR_RECORDER);
    assert_int_equal(ib_log_recorder_route(r, f.ids[1], PARTITIONS, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_log_recorder_partition_stats(r, 3).records, 0);
    assert_false(ib_log_recorder_owns(r, 3));
    ib_log_recorder_disown(r, 0);
    assert_false(ib_log_recorder_owns(r, 0));
    ib_recorder_close(r);
    close_fixture(&f);
}

static void test_nothing_new_past_the_stop_time(void **state)
{
    it_env *e = *state;
    fixture f;
    open_log(&f, e);
    ib_recorder *r = owner_of(&f, 1, 1);
    ib_claim_info info[2];
    bool taken[2], held[2], marked[2];
    ib_error err = {0};
    assert_int_equal(claim(r, info, taken, f.keys, 2, 0), IB_OK);
    assert_int_equal(info[1].state, IB_CLAIM_ACQUIRED);
    ib_log_recorder_hold_until(r, 1, 0); /* the lease could not be renewed in time */
    assert_int_equal(ib_recorder_renew_batch(r, held, f.keys, 2, OWNER, 1000, &err), IB_OK);
    assert_false(held[0] || held[1]);
    assert_int_equal(claim(r, info, taken, f.keys + 2, 1, 0), IB_OK);
    assert_int_equal(info[0].state, IB_CLAIM_BUSY);
    /* the first call ran before the stop: its mark is a fact */
    assert_int_equal(ib__recorder_mark_owned_checked(r, marked, f.keys, NULL, 1, OWNER, &err),
                     IB_OK);
    assert_true(marked[0]);
    ib_log_recorder_hold_until(r, 1, INT64_MAX); /* renewed */
    assert_int_equal(ib_recorder_renew_batch(r, held, f.keys + 1, 1, OWNER, 1000, &err), IB_OK);
    assert_true(held[0]);
    ib_recorder_close(r);
    close_fixture(&f);
}

static void test_unacknowledged_append_fails_the_call(void **state)
{
    it_env *e = *state;
    fixture f;
    open_log(&f, e);
    ib_recorder *r = owner_of(&f, 1, 1);
    ib_claim_info info;
    bool taken;
    assert_true(it_server_stop(&e->server));
    assert_int_equal(claim(r, &info, &taken, f.keys, 1, 0), IB_ERR_RECORDER);
    ib_marker_table_stats st = ib_log_recorder_partition_stats(r, 1);
    assert_int_equal(st.records, 0); /* nothing applied that was not stored */
    assert_int_equal(st.pairs, 0);
    ib_recorder_close(r);
    close_fixture(&f);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_marks_and_calls_in_flight_outlive_the_owner, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(test_counted_attempts_exhaust_and_end, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(test_partitions_not_owned_decide_nothing, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(test_nothing_new_past_the_stop_time, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(test_unacknowledged_append_fails_the_call, it_setup,
                                    it_teardown),
};

IB_TEST_MAIN(tests)
