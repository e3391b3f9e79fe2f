/* SPDX-License-Identifier: Apache-2.0 */
/* Partitions agree with the server (issue 47, item 1): a real nats-server
 * maps subjects with {{partition(N, ...)}}, and for every key the
 * partition it chose is the one ibus computes (core/partition.h). Keys of
 * every kind a producer may name: normalised and dashed ids, business
 * keys, UTF-8, keys longer than the server's first buffer; N of 1, 7, 16
 * and 1000; and a key read from two tokens, which the server hashes one
 * after the other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "partition.h"

#define KEYS_PER_KIND 250

static const unsigned PARTITIONS[] = {1, 7, 16, 1000};

/* The key of number i of a kind: what producers name a partition by. */
static void make_key(char *out, size_t cap, unsigned kind, unsigned i)
{
    unsigned long long a = 0x9e3779b97f4a7c15ull * (i + 1), b = a ^ (a >> 29) ^ (0xabcdull * i);
    switch (kind) {
    case 0: /* a normalised event id */
        snprintf(out, cap, "%016llx%016llx", a, b);
        break;
    case 1: /* a dashed one */
        snprintf(out, cap, "%08llx-%04llx-4%03llx-8%03llx-%012llx", a >> 32, (a >> 16) & 0xffff,
                 a & 0xfff, b & 0xfff, b >> 16 & 0xffffffffffffull);
        break;
    case 2: /* a business key */
        snprintf(out, cap, "account-%u", i * 7919u);
        break;
    case 3: /* UTF-8 */
        snprintf(out, cap, "kunde-\xc3\xbc-%u-\xe6\x9d\xb1", i);
        break;
    default: { /* longer than the 64 bytes the server starts its buffer with */
        int n = snprintf(out, cap, "order-%u-", i);
        while ((size_t)n + 1 < cap && n < 150 + (int)(i % 50)) {
            out[n] = (char)('a' + (i + (unsigned)n) % 26);
            n++;
        }
        out[n] = '\0';
    }
    }
}

static char *mappings(void)
{
    static char text[1024];
    size_t n = (size_t)snprintf(text, sizeof(text), "mappings = {\n");
    for (size_t k = 0; k < sizeof(PARTITIONS) / sizeof(PARTITIONS[0]); k++)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "  \"ibpart.in%u.*\": \"ibpart.out%u.{{partition(%u,1)}}."
                              "{{wildcard(1)}}\"\n",
                              PARTITIONS[k], PARTITIONS[k], PARTITIONS[k]);
    snprintf(text + n, sizeof(text) - n,
             "  \"ibpart.two.*.*\": \"ibpart.out2.{{partition(13,1,2)}}.{{wildcard(1)}}."
             "{{wildcard(2)}}\"\n}\n");
    return text;
}

/* Splits `subject` at its dots into at most `max` tokens. */
static size_t tokens(char *subject, char **tok, size_t max)
{
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(subject, ".", &save); t != NULL && n < max;
         t = strtok_r(NULL, ".", &save))
        tok[n++] = t;
    return n;
}

static void expect_partition(natsMsg *m, size_t *checked)
{
    char subject[512], *tok[6];
    snprintf(subject, sizeof(subject), "%s", natsMsg_GetSubject(m));
    size_t n = tokens(subject, tok, 6);
    assert_true(n >= 4);
    unsigned long chosen = strtoul(tok[2], NULL, 10);
    uint32_t want;
    if (strcmp(tok[1], "out2") == 0) {
        assert_int_equal(n, 5);
        uint32_t h = ib_partition_hash(tok[3], strlen(tok[3]));
        want = ib_partition_of(ib_partition_hash_more(h, tok[4], strlen(tok[4])), 13);
    } else {
        unsigned parts = (unsigned)strtoul(tok[1] + 3, NULL, 10);
        assert_int_equal(n, 4);
        want = ib_partition_of(ib_partition_hash(tok[3], strlen(tok[3])), parts);
    }
    if (chosen != want)
        fail_msg("the server put %s in partition %lu, ibus computes %u", natsMsg_GetSubject(m),
                 chosen, want);
    (*checked)++;
}

static void test_server_mapping_and_ibus_agree(void **state)
{
    (void)state;
    char dir[512];
    assert_true(it_tmpdir_create(dir, sizeof(dir)));
    it_server server;
    it_server_opts o = {.extra = mappings()};
    assert_true(it_server_start(&server, dir, &o));
    natsConnection *nc = it_server_client(&server);
    assert_non_null(nc);
    natsSubscription *sub = NULL;
    assert_int_equal(natsConnection_SubscribeSync(&sub, nc, "ibpart.>"), NATS_OK);
    assert_int_equal(natsSubscription_SetPendingLimits(sub, -1, -1), NATS_OK);

    size_t sent = 0;
    char key[256], key2[256], subject[600];
    for (unsigned kind = 0; kind < 5; kind++)
        for (unsigned i = 0; i < KEYS_PER_KIND; i++) {
            make_key(key, sizeof(key), kind, i);
            for (size_t k = 0; k < sizeof(PARTITIONS) / sizeof(PARTITIONS[0]); k++) {
                snprintf(subject, sizeof(subject), "ibpart.in%u.%s", PARTITIONS[k], key);
                assert_int_equal(natsConnection_PublishString(nc, subject, "x"), NATS_OK);
                sent++;
            }
            make_key(key2, sizeof(key2), (kind + 1) % 5, i + 1);
            snprintf(subject, sizeof(subject), "ibpart.two.%s.%s", key, key2);
            assert_int_equal(natsConnection_PublishString(nc, subject, "x"), NATS_OK);
            sent++;
        }
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);

    size_t checked = 0, unmapped = 0;
    unsigned seen[16] = {0};
    for (size_t got = 0; got < sent; got++) {
        natsMsg *m = NULL;
        assert_int_equal(natsSubscription_NextMsg(&m, sub, 10000), NATS_OK);
        const char *s = natsMsg_GetSubject(m);
        if (strncmp(s, "ibpart.out", 10) != 0) {
            unmapped++;
        } else {
            if (strncmp(s, "ibpart.out16.", 13) == 0)
                seen[strtoul(s + 13, NULL, 10) % 16]++;
            expect_partition(m, &checked);
        }
        natsMsg_Destroy(m);
    }
    assert_int_equal(unmapped, 0);
    assert_int_equal(checked, sent);
    /* the keys spread: every one of 16 partitions got some */
    for (unsigned p = 0; p < 16; p++)
        assert_true(seen[p] > 0);
    printf("it_partition: %zu subjects mapped by the server, every partition as ibus computes\n",
           checked);
    natsSubscription_Destroy(sub);
    assert_true(it_server_stop(&server));
    it_server_free(&server);
    it_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_mapping_and_ibus_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
