/* SPDX-License-Identifier: Apache-2.0 */
/* Partitions (issue 47, items 1 and 2), against a real nats-server:
 *  - the server and ibus agree: the server maps subjects with
 *    {{partition(N, ...)}}, and for every key the partition it chose is
 *    the one ibus computes (core/partition.h). Keys of every kind a
 *    producer may name: normalised and dashed ids, business keys, UTF-8,
 *    keys longer than the server's first buffer; N of 1, 7, 16 and 1000;
 *    and a key read from two tokens, which the server hashes one after
 *    the other;
 *  - `ibus publish --partitions N` stores each event on
 *    <subject>.<p>.<key>: its id by default, duplicates on their
 *    original's subject, a JSON line's "partition_key" or --partition-key
 *    instead; a key that is not one subject token is refused (exit 2, or
 *    the run ends at that line) and stores nothing. */
#include <limits.h>
#include <stdarg.h>
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

/* Every message on ibp.> so far, as subjects. */
static size_t take_subjects(natsSubscription *sub, char ***out)
{
    size_t n = 0, cap = 0;
    char **v = NULL;
    natsMsg *m = NULL;
    while (natsSubscription_NextMsg(&m, sub, 500) == NATS_OK) {
        if (n == cap) {
            cap = cap > 0 ? cap * 2 : 64;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        v[n++] = strdup(natsMsg_GetSubject(m));
        natsMsg_Destroy(m);
    }
    *out = v;
    return n;
}

static void free_subjects(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Checks "ibp.<p>.<key>" against 16 partitions; returns its key. */
static const char *partition_key_of(const char *subject)
{
    char copy[512], *tok[4];
    snprintf(copy, sizeof(copy), "%s", subject);
    assert_int_equal(tokens(copy, tok, 4), 3);
    assert_string_equal(tok[0], "ibp");
    const char *key = subject + strlen(tok[0]) + strlen(tok[1]) + 2;
    uint32_t want = ib_partition_of(ib_partition_hash(key, strlen(key)), 16);
    if (strtoul(tok[1], NULL, 10) != want)
        fail_msg("%s is in partition %s, its key's is %u", subject, tok[1], want);
    return key;
}

static void test_publish_puts_events_on_their_partition(void **state)
{
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    const char *subjects[] = {"ibp.>"};
    jsStreamConfig sc;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsStreamConfig_Init(&sc);
    sc.Name = "IBP";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    natsSubscription *sub = NULL;
    assert_int_equal(natsConnection_SubscribeSync(&sub, it_server_client(&e->server), "ibp.>"),
                     NATS_OK);

    /* ids as keys; duplicates go where their originals went */
    char ids_path[PATH_MAX], *err = NULL;
    it_path(ids_path, e, "ids");
    assert_int_equal(it_publish_capture(NULL, &err, e, NULL, "--subject", "ibp", "--partitions",
                                        "16", "--type", "t.x", "--count", "300", "--duplicates",
                                        "0.25", "--ids-file", ids_path, NULL),
                     0);
    free(err);
    char **ids = NULL, **got = NULL;
    size_t nids = it_file_read_lines(&ids, ids_path);
    size_t n = take_subjects(sub, &got);
    assert_int_equal(nids, 300);
    assert_true(n > 300); /* the duplicates too */
    unsigned per_id[300] = {0};
    for (size_t i = 0; i < n; i++) {
        const char *key = partition_key_of(got[i]);
        size_t k = 0;
        while (k < nids && strcmp(ids[k], key) != 0)
            k++;
        if (k == nids)
            fail_msg("%s: its key is no id that was published", got[i]);
        per_id[k]++;
    }
    size_t repeated = 0;
    for (size_t k = 0; k < nids; k++) {
        assert_true(per_id[k] >= 1);
        repeated += per_id[k] - 1;
    }
    assert_int_equal(repeated, n - 300);
    free_subjects(got, n);
    it_lines_free(ids, nids);

    /* business keys: a JSON line's own, else --partition-key */
    char lines_path[PATH_MAX];
    const char *lines = "{\"type\":\"t.x\",\"payload\":\"a\",\"partition_key\":\"account-7\"}\n"
                        "{\"type\":\"t.x\",\"payload\":\"b\",\"partition_key\":\"account-7\"}\n"
                        "{\"type\":\"t.x\",\"payload\":\"c\",\"partition_key\":\"kunde-\u00fc\"}\n"
                        "{\"type\":\"t.x\",\"payload\":\"d\"}\n";
    assert_true(it_file_write(it_path(lines_path, e, "keys.jsonl"), lines, strlen(lines)));
    assert_int_equal(it_publish_capture(NULL, &err, e, lines_path, "--subject", "ibp",
                                        "--partitions", "16", "--partition-key", "order-9", NULL),
                     0);
    free(err);
    n = take_subjects(sub, &got);
    assert_int_equal(n, 4);
    assert_string_equal(partition_key_of(got[0]), "account-7");
    assert_string_equal(got[1], got[0]);
    assert_string_equal(partition_key_of(got[2]), "kunde-\xc3\xbc");
    assert_string_equal(partition_key_of(got[3]), "order-9");
    free_subjects(got, n);

    /* keys that are not one token, and --partition-key alone */
    assert_int_equal(it_publish_capture(NULL, &err, e, NULL, "--subject", "ibp", "--partitions",
                                        "16", "--type", "t.x", "--partition-key", "a.b", "x", NULL),
                     2);
    it_assert_contains(err, "byte 2 of this one is 0x2e");
    free(err);
    assert_int_equal(it_publish_capture(NULL, &err, e, NULL, "--subject", "ibp", "--type", "t.x",
                                        "--partition-key", "a", "x", NULL),
                     2);
    it_assert_contains(err, "--partition-key needs --partitions");
    free(err);
    assert_int_equal(it_publish_capture(NULL, &err, e, NULL, "--subject", "ibp", "--partitions",
                                        "16", "--raw", "x", NULL),
                     2);
    it_assert_contains(err, "--partitions needs events, not --raw bytes");
    free(err);
    const char *unpartitioned = "{\"type\":\"t.x\",\"payload\":\"a\",\"partition_key\":\"k\"}\n";
    assert_true(
        it_file_write(it_path(lines_path, e, "nokey.jsonl"), unpartitioned, strlen(unpartitioned)));
    assert_int_not_equal(it_publish_capture(NULL, &err, e, lines_path, "--subject", "ibp", NULL),
                         0);
    it_assert_contains(err, "stdin line 1: \"partition_key\" must be a string, and needs "
                            "--partitions");
    free(err);
    const char *bad = "{\"type\":\"t.x\",\"payload\":\"a\",\"partition_key\":\"two words\"}\n";
    assert_true(it_file_write(it_path(lines_path, e, "bad.jsonl"), bad, strlen(bad)));
    assert_int_not_equal(it_publish_capture(NULL, &err, e, lines_path, "--subject", "ibp",
                                            "--partitions", "16", NULL),
                         0);
    it_assert_contains(err, "stdin line 1: \"partition_key\": a partition key is one subject "
                            "token, but byte 4 of this one is 0x20");
    free(err);
    n = take_subjects(sub, &got);
    assert_int_equal(n, 0);
    free_subjects(got, n);
    natsSubscription_Destroy(sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_mapping_and_ibus_agree),
        cmocka_unit_test_setup_teardown(test_publish_puts_events_on_their_partition, it_setup,
                                        it_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
