/* SPDX-License-Identifier: Apache-2.0 */
/* Rendezvous hashing: every partition has one owner whatever the order
 * of the members, the owners are spread evenly, a join moves to the new
 * member only and about N/P of N, a leave moves only the leaver's, and
 * the scores are pinned (every process of a fleet must compute them
 * alike, across versions). */
#include "ib_test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rendezvous.h"

#define N 4096u
#define MEMBERS 6

static char names[MEMBERS][48];
static const char *members[MEMBERS];

/* Owner tokens in the shape ibus makes them: durable@host-pid-random. */
static void make_members(void)
{
    for (int i = 0; i < MEMBERS; i++) {
        snprintf(names[i], sizeof(names[i]), "orders@ibus-7d9f%02d-%d-%08x", i, 1000 + i,
                 (unsigned)(0x5bd1e995u * (unsigned)(i + 1)));
        members[i] = names[i];
    }
}

/* Values computed by an independent implementation of the same steps
 * (FNV-1a-64 of the name, XOR the SplitMix64 finaliser of the partition
 * plus the golden ratio, finalised again): a change here would split a
 * fleet running two versions. */
static void test_scores_are_pinned(void **state)
{
    (void)state;
    assert_true(ib_rendezvous_score("a", 0) == 0x223510de0dd4615full);
    assert_true(ib_rendezvous_score("orders@pod-1", 7) == 0xa00904f63a1c01b4ull);
    assert_true(ib_rendezvous_score("", 4095) == 0x63ff54fe192e402dull);
}

static void test_no_members_no_owner(void **state)
{
    (void)state;
    assert_true(ib_rendezvous_owner(NULL, 0, 7) == SIZE_MAX);
    const char *one[] = {"solo"};
    for (uint32_t p = 0; p < 64; p++)
        assert_int_equal(ib_rendezvous_owner(one, 1, p), 0);
}

/* The same members in reverse order give every partition the same owner
 * (by name); a name listed twice changes nothing. */
static void test_order_does_not_matter(void **state)
{
    (void)state;
    make_members();
    const char *reversed[MEMBERS], *doubled[MEMBERS + 1];
    for (int i = 0; i < MEMBERS; i++) {
        reversed[i] = members[MEMBERS - 1 - i];
        doubled[i] = members[i];
    }
    doubled[MEMBERS] = members[2];
    for (uint32_t p = 0; p < N; p++) {
        size_t a = ib_rendezvous_owner(members, MEMBERS, p);
        size_t b = ib_rendezvous_owner(reversed, MEMBERS, p);
        size_t c = ib_rendezvous_owner(doubled, MEMBERS + 1, p);
        assert_string_equal(members[a], reversed[b]);
        assert_string_equal(members[a], doubled[c]);
    }
}

/* Each of P members owns N/P partitions, within 15 %. */
static void test_owners_are_even(void **state)
{
    (void)state;
    make_members();
    for (size_t p = 1; p <= MEMBERS; p++) {
        size_t owned[MEMBERS] = {0};
        for (uint32_t k = 0; k < N; k++)
            owned[ib_rendezvous_owner(members, p, k)]++;
        for (size_t i = 0; i < p; i++) {
            double share = (double)owned[i] * (double)p / N;
            assert_true(share > 0.85 && share < 1.15);
        }
    }
}

/* A sixth member joins five: every partition that changes owner goes to
 * it, and about N/6 do. Then a member leaves: only its partitions move. */
static void test_join_and_leave_move_little(void **state)
{
    (void)state;
    make_members();
    size_t moved = 0;
    for (uint32_t k = 0; k < N; k++) {
        size_t before = ib_rendezvous_owner(members, MEMBERS - 1, k);
        size_t after = ib_rendezvous_owner(members, MEMBERS, k);
        if (after != before) {
            assert_int_equal(after, MEMBERS - 1);
            moved++;
        }
    }
    double share = (double)moved * MEMBERS / N;
    assert_true(share > 0.85 && share < 1.15);

    /* member 1 leaves: the list without it */
    const char *left[MEMBERS - 1];
    for (int i = 0, j = 0; i < MEMBERS; i++)
        if (i != 1)
            left[j++] = members[i];
    for (uint32_t k = 0; k < N; k++) {
        const char *before = members[ib_rendezvous_owner(members, MEMBERS, k)];
        const char *after = left[ib_rendezvous_owner(left, MEMBERS - 1, k)];
        if (before != members[1])
            assert_string_equal(before, after);
        else
            assert_true(after != members[1]);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_scores_are_pinned),          cmocka_unit_test(test_no_members_no_owner),
    cmocka_unit_test(test_order_does_not_matter),      cmocka_unit_test(test_owners_are_even),
    cmocka_unit_test(test_join_and_leave_move_little),
};

IB_TEST_MAIN(tests)
