/* SPDX-License-Identifier: Apache-2.0 */
/* The retries an --idle-exit run waits for (host_retries.c): the table
 * against a model under random naks and acks (its hash deletes by
 * backward shift, the part easiest to get wrong), and which retries the
 * idle exit still waits for. */
#include "ib_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host_internal.h"

#define SEQS 700

/* Every nak and ack drawn at random over SEQS sequences, growing the
 * table several times; after each step the table holds exactly the
 * model's entries, with the latest due time of each. */
static void random_naks_and_acks_match_a_model(void **state)
{
    (void)state;
    static int64_t model[SEQS + 1]; /* due time + 1; 0 = absent */
    ib_host_retries *r = ib__host_retries_new();
    assert_non_null(r);
    memset(model, 0, sizeof(model));
    srand(45);
    for (int step = 0; step < 20000; step++) {
        uint64_t seq = 1 + (uint64_t)rand() % SEQS;
        if (rand() % 3 != 0) {
            int64_t due = rand() % 100000;
            ib__host_retries_add(r, seq, due, NULL);
            model[seq] = due + 1;
        } else {
            ib__host_retries_drop(r, seq);
            model[seq] = 0;
        }
        if (step % 97 != 0)
            continue;
        size_t want = 0;
        int64_t latest = -1;
        for (size_t i = 1; i <= SEQS; i++)
            if (model[i] != 0) {
                want++;
                latest = model[i] - 1 > latest ? model[i] - 1 : latest;
            }
        int64_t until;
        assert_int_equal(ib__host_retries_due(r, -IB_HOST_RETRY_GRACE_MS, INT64_MAX, &until), want);
        if (want > 0)
            assert_int_equal(until, latest + IB_HOST_RETRY_GRACE_MS);
    }
    for (uint64_t seq = 1; seq <= SEQS; seq++)
        ib__host_retries_drop(r, seq);
    int64_t until;
    assert_int_equal(ib__host_retries_due(r, 0, INT64_MAX, &until), 0);
    assert_int_equal(until, 0);
    ib__host_retries_free(r);
    ib__host_retries_free(NULL);
}

/* At the idle exit: a retry is awaited until its delay and the grace
 * have passed, and only when its delay ends within the wait bound. */
static void which_retries_the_idle_exit_waits_for(void **state)
{
    (void)state;
    ib_host_retries *r = ib__host_retries_new();
    assert_non_null(r);
    ib__host_retries_add(r, 1, 5000, NULL);   /* back in 4 s */
    ib__host_retries_add(r, 2, 600000, NULL); /* back in 10 min */
    ib__host_retries_add(r, 3, 500, NULL);    /* overdue, within the grace */
    ib__host_retries_add(r, 4, -5000, NULL);  /* overdue past the grace: went elsewhere */
    int64_t until;
    assert_int_equal(ib__host_retries_due(r, 1000, 61000, &until), 2);
    assert_int_equal(until, 5000 + IB_HOST_RETRY_GRACE_MS);
    ib__host_retries_add(r, 1, 70000, NULL); /* nak'ed again, beyond the bound */
    assert_int_equal(ib__host_retries_due(r, 1000, 61000, &until), 1);
    assert_int_equal(until, 500 + IB_HOST_RETRY_GRACE_MS);
    assert_int_equal(ib__host_retries_due(r, 3000, 61000, &until), 0);
    assert_int_equal(until, 3000);
    /* a table that could not be made waits for nothing */
    assert_int_equal(ib__host_retries_due(NULL, 0, INT64_MAX, &until), 0);
    ib__host_retries_free(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(random_naks_and_acks_match_a_model),
    cmocka_unit_test(which_retries_the_idle_exit_waits_for),
};

IB_TEST_MAIN(tests)
