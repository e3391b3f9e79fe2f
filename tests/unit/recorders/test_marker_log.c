/* SPDX-License-Identifier: Apache-2.0 */
/* The marker log of a partition (marker_log.h): a record encodes to the
 * documented bytes and back; each rule of the format refuses a record
 * that breaks it, naming the rule and never the bytes; the table adds
 * records up as the essay says (attempts, the first mark standing, ended
 * attempts, stale epochs counted, a record applied whole); and, against
 * a plain model, thousands of random records leave the same state. */
#include "ib_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker_log.h"
#include "marker_table.h"
#include "uuid.h"

static const char *const two_names[] = {"orders/audit/audit", "orders/mail/mail"};

static void id_of(uint8_t out[16], unsigned n)
{
    char hex[IB_ID_BUF_SIZE];
    snprintf(hex, sizeof(hex), "%08x000040008000%012x", n, n * 2654435761u);
    assert_true(ib_id_pack(out, hex));
}

static ib_marker_log_record record_of(ib_marker_log_kind kind, ib_marker_log_entry *entries,
                                      size_t n)
{
    return (ib_marker_log_record){.kind = kind,
                                  .partition = 7,
                                  .epoch = 3,
                                  .sequence = 12,
                                  .names = two_names,
                                  .nnames = 2,
                                  .entries = entries,
                                  .nentries = n};
}

static size_t encode(const ib_marker_log_record *rec, uint8_t *buf, size_t cap)
{
    size_t len = 0;
    ib_error e = {0};
    assert_int_equal(ib_marker_log_encode(rec, buf, cap, &len, &e), IB_OK);
    assert_int_equal(len, ib_marker_log_size(rec));
    return len;
}

/* The bytes of a small record, field by field as the essay lists them,
 * and the same record back. */
static void test_record_bytes_and_back(void **state)
{
    (void)state;
    ib_marker_log_entry in[2] = {{.consumer = 1, .fingerprint = 0x1122334455667788ull},
                                 {.consumer = 0, .fingerprint = 42}};
    id_of(in[0].id, 1);
    id_of(in[1].id, 2);
    ib_marker_log_record rec = record_of(IB_MARKER_LOG_DONE, in, 2);
    uint8_t buf[256];
    size_t len = encode(&rec, buf, sizeof(buf));
    assert_int_equal(len, 32 + 1 + 18 + 1 + 16 + 2 * 26);
    static const uint8_t head[32] = {'I', 'B', 'M', 'L', 1,  2, 2, 0, 7, 0, 0, 0, 3, 0, 0, 0,
                                     0,   0,   0,   0,   12, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
    assert_memory_equal(buf, head, sizeof(head));
    assert_int_equal(buf[32], 18);
    assert_memory_equal(buf + 33, "orders/audit/audit", 18);
    const uint8_t *e0 = buf + 32 + 1 + 18 + 1 + 16;
    assert_int_equal(e0[0], 1);
    assert_int_equal(e0[1], 0);
    assert_memory_equal(e0 + 2, in[0].id, 16);
    assert_int_equal(e0[18], 0x88);
    assert_int_equal(e0[25], 0x11);

    ib_marker_log_record out;
    ib_marker_log_names names;
    ib_marker_log_entry entries[4];
    ib_error e = {0};
    assert_int_equal(ib_marker_log_decode(&out, buf, len, &names, entries, 4, &e), IB_OK);
    assert_int_equal(out.kind, IB_MARKER_LOG_DONE);
    assert_int_equal(out.partition, 7);
    assert_int_equal(out.epoch, 3);
    assert_int_equal(out.sequence, 12);
    assert_int_equal(out.nnames, 2);
    assert_string_equal(out.names[0], two_names[0]);
    assert_string_equal(out.names[1], two_names[1]);
    assert_int_equal(out.nentries, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(out.entries[i].consumer, in[i].consumer);
        assert_memory_equal(out.entries[i].id, in[i].id, 16);
        assert_true(out.entries[i].fingerprint == in[i].fingerprint);
    }
    char id[64];
    assert_true(ib_marker_log_msg_id(id, sizeof(id), "orders", 7, 3, 12));
    assert_string_equal(id, "ibml-orders-7-3-12");
    assert_false(ib_marker_log_msg_id(id, 10, "orders", 7, 3, 12));
}

/* Expects decode to refuse `buf` with a message containing `why`. */
static void refused(const uint8_t *buf, size_t len, size_t cap, const char *why)
{
    ib_marker_log_record out;
    ib_marker_log_names names;
    ib_marker_log_entry entries[8];
    ib_error e = {0};
    assert_int_equal(ib_marker_log_decode(&out, buf, len, &names, entries, cap, &e),
                     IB_ERR_INVALID_ARG);
    if (strstr(e.msg, why) == NULL)
        fail_msg("expected \"%s\" in \"%s\"", why, e.msg);
}

/* Each rule of the format, broken once in a valid record. */
static void test_each_rule_refuses(void **state)
{
    (void)state;
    ib_marker_log_entry in[2] = {{.consumer = 1}, {.consumer = 0}};
    id_of(in[0].id, 1);
    id_of(in[1].id, 2);
    ib_marker_log_record rec = record_of(IB_MARKER_LOG_CLAIMED, in, 2);
    uint8_t good[256], buf[256];
    size_t len = encode(&rec, good, sizeof(good));
    size_t entries_at = len - 2 * 26, name0 = 32;

    refused(good, 31, 8, "no IBML header");
    memcpy(buf, good, len);
    buf[0] = 'X';
    refused(buf, len, 8, "no IBML header");
    memcpy(buf, good, len);
    buf[4] = 2;
    refused(buf, len, 8, "version 2");
    memcpy(buf, good, len);
    buf[5] = 6;
    refused(buf, len, 8, "unknown kind 6");
    memcpy(buf, good, len);
    buf[5] = 0;
    refused(buf, len, 8, "unknown kind 0");
    memcpy(buf, good, len);
    buf[6] = 0;
    refused(buf, len, 8, "0 consumers");
    memcpy(buf, good, len);
    buf[6] = 65;
    refused(buf, len, 8, "65 consumers");
    memcpy(buf, good, len);
    buf[28] = 0;
    refused(buf, len, 8, "0 entries");
    memcpy(buf, good, len);
    buf[29] = 0x20; /* 8194 entries */
    refused(buf, len, 8, "8194 entries");
    refused(good, len, 1, "room for 1");
    memcpy(buf, good, len);
    buf[name0] = 0;
    refused(buf, len, 8, "consumer name 0 is not");
    memcpy(buf, good, len);
    buf[name0 + 3] = '\n';
    refused(buf, len, 8, "consumer name 0 is not");
    memcpy(buf, good, len);
    buf[name0 + 3] = (char)0xc3; /* a lead byte with no continuation */
    refused(buf, len, 8, "consumer name 0 is not");
    memcpy(buf, good, len);
    buf[name0] = 250; /* runs past the end */
    refused(buf, len, 8, "ends inside consumer name 0");
    memcpy(buf, good, len);
    buf[entries_at] = 2; /* consumer index 2 of 2 */
    refused(buf, len, 8, "entry 0 names consumer 2 of 2");
    refused(good, len - 1, 8, "bytes of entries");
    memcpy(buf, good, len);
    buf[len] = 0;
    refused(buf, len + 1, 8, "bytes of entries");
}

/* What encode refuses: the same rules, from the writer's side. */
static void test_encode_refuses_bad_records(void **state)
{
    (void)state;
    ib_marker_log_entry in[1] = {{.consumer = 2}};
    id_of(in[0].id, 1);
    uint8_t buf[256];
    size_t len = 0;
    ib_error e = {0};
    ib_marker_log_record rec = record_of(IB_MARKER_LOG_DONE, in, 1);
    assert_int_equal(ib_marker_log_encode(&rec, buf, sizeof(buf), &len, &e), IB_ERR_INVALID_ARG);
    in[0].consumer = 0;
    rec.nentries = 0;
    assert_int_equal(ib_marker_log_encode(&rec, buf, sizeof(buf), &len, &e), IB_ERR_INVALID_ARG);
    rec.nentries = 1;
    rec.kind = (ib_marker_log_kind)9;
    assert_int_equal(ib_marker_log_encode(&rec, buf, sizeof(buf), &len, &e), IB_ERR_INVALID_ARG);
    rec.kind = IB_MARKER_LOG_DONE;
    const char *bad[] = {"tab\there"};
    rec.names = bad;
    rec.nnames = 1;
    assert_int_equal(ib_marker_log_encode(&rec, buf, sizeof(buf), &len, &e), IB_ERR_INVALID_ARG);
    rec.names = two_names;
    assert_int_equal(ib_marker_log_encode(&rec, buf, 40, &len, &e), IB_ERR_INVALID_ARG);
    assert_int_equal(len, 0);
}

static void apply(ib_marker_table *t, ib_marker_log_kind kind, uint64_t epoch,
                  ib_marker_log_entry *entries, size_t n)
{
    ib_marker_log_record rec = record_of(kind, entries, n);
    rec.epoch = epoch;
    ib_error e = {0};
    assert_int_equal(ib_marker_table_apply(t, &rec, &e), IB_OK);
}

/* The rules of the memory, one at a time. */
static void test_table_adds_records_up(void **state)
{
    (void)state;
    ib_marker_table *t;
    ib_error e = {0};
    assert_int_equal(ib_marker_table_create(&t, &e), IB_OK);
    ib_marker_log_entry a = {.consumer = 0, .fingerprint = 10};
    ib_marker_log_entry a_mail = {.consumer = 1, .fingerprint = 10};
    id_of(a.id, 5);
    memcpy(a_mail.id, a.id, 16);

    assert_false(ib_marker_table_lookup(t, two_names[0], a.id).known);
    assert_false(ib_marker_table_knows(t, two_names[0]));
    apply(t, IB_MARKER_LOG_CLAIMED, 1, &a, 1);
    assert_true(ib_marker_table_knows(t, two_names[0])); /* a record named it */
    ib_pair_state s = ib_marker_table_lookup(t, two_names[0], a.id);
    assert_true(s.known && !s.marked && s.in_flight);
    assert_int_equal(s.attempts, 0);
    apply(t, IB_MARKER_LOG_COUNTED, 1, &a, 1);
    apply(t, IB_MARKER_LOG_RELEASED, 1, &a, 1);
    apply(t, IB_MARKER_LOG_COUNTED, 1, &a, 1);
    s = ib_marker_table_lookup(t, two_names[0], a.id);
    assert_true(s.known && !s.marked && !s.in_flight);
    assert_int_equal(s.attempts, 2);
    assert_false(ib_marker_table_lookup(t, two_names[1], a.id).known); /* per consumer */
    apply(t, IB_MARKER_LOG_CLAIMED, 1, &a, 1);
    apply(t, IB_MARKER_LOG_ENDED, 1, &a, 1);
    s = ib_marker_table_lookup(t, two_names[0], a.id);
    assert_int_equal(s.attempts, 0);
    assert_false(s.in_flight);
    apply(t, IB_MARKER_LOG_CLAIMED, 1, &a, 1);

    apply(t, IB_MARKER_LOG_DONE, 2, &a, 1);
    ib_marker_log_entry other = a;
    other.fingerprint = 99;
    apply(t, IB_MARKER_LOG_DONE, 2, &other, 1); /* the first mark stands */
    apply(t, IB_MARKER_LOG_CLAIMED, 2, &other, 1);
    apply(t, IB_MARKER_LOG_COUNTED, 2, &other, 1);
    apply(t, IB_MARKER_LOG_ENDED, 2, &other, 1);
    s = ib_marker_table_lookup(t, two_names[0], a.id);
    assert_true(s.marked);
    assert_false(s.in_flight); /* the mark took it out of flight */
    assert_true(s.fingerprint == 10);
    assert_int_equal(s.attempts, 0);

    apply(t, IB_MARKER_LOG_DONE, 1, &a_mail, 1); /* a stale owner's record still marks */
    assert_true(ib_marker_table_lookup(t, two_names[1], a.id).marked);
    assert_false(ib_marker_table_lookup(t, "orders/other/other", a.id).known);
    assert_false(ib_marker_table_knows(t, "orders/other/other"));
    ib_marker_table_stats st = ib_marker_table_stats_get(t);
    assert_int_equal(st.pairs, 2);
    assert_int_equal(st.records, 13);
    assert_int_equal(st.stale_records, 1);
    assert_int_equal(st.epoch, 2);
    ib_marker_table_free(t);
}

/* A plain model of the same rules: an array searched from the start. */
typedef struct model_pair {
    uint16_t consumer;
    uint8_t id[16];
    bool marked;
    bool in_flight;
    uint32_t attempts;
    uint64_t fingerprint;
} model_pair;

static model_pair *model_find(model_pair *m, size_t n, uint16_t consumer, const uint8_t *id)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].consumer == consumer && memcmp(m[i].id, id, 16) == 0)
            return &m[i];
    return NULL;
}

/* 3,000 random records over 600 ids and two consumers (so the table grows
 * several times) leave the table as the model: every pair, every field. */
static void test_table_matches_a_model(void **state)
{
    (void)state;
    enum { IDS = 600, RECORDS = 3000, MAX_ENTRIES = 40 };
    model_pair *model = calloc(2 * IDS, sizeof(*model));
    size_t nmodel = 0;
    ib_marker_table *t;
    ib_error e = {0};
    assert_non_null(model);
    assert_int_equal(ib_marker_table_create(&t, &e), IB_OK);
    srand(47);
    for (int r = 0; r < RECORDS; r++) {
        ib_marker_log_entry entries[MAX_ENTRIES];
        size_t n = 1 + (size_t)rand() % MAX_ENTRIES;
        int roll = rand() % 10;
        static const ib_marker_log_kind kinds[10] = {IB_MARKER_LOG_CLAIMED,  IB_MARKER_LOG_CLAIMED,
                                                     IB_MARKER_LOG_COUNTED,  IB_MARKER_LOG_COUNTED,
                                                     IB_MARKER_LOG_RELEASED, IB_MARKER_LOG_DONE,
                                                     IB_MARKER_LOG_DONE,     IB_MARKER_LOG_DONE,
                                                     IB_MARKER_LOG_DONE,     IB_MARKER_LOG_ENDED};
        ib_marker_log_kind kind = kinds[roll];
        for (size_t i = 0; i < n; i++) {
            entries[i].consumer = (uint16_t)(rand() % 2);
            id_of(entries[i].id, (unsigned)(rand() % IDS));
            entries[i].fingerprint = (uint64_t)(rand() % 3);
            model_pair *p = model_find(model, nmodel, entries[i].consumer, entries[i].id);
            if (p == NULL && (kind == IB_MARKER_LOG_ENDED || kind == IB_MARKER_LOG_RELEASED))
                continue;
            if (p == NULL) {
                p = &model[nmodel++];
                p->consumer = entries[i].consumer;
                memcpy(p->id, entries[i].id, 16);
                p->fingerprint = entries[i].fingerprint;
            }
            if (p->marked)
                continue;
            if (kind == IB_MARKER_LOG_CLAIMED)
                p->in_flight = true;
            else if (kind == IB_MARKER_LOG_COUNTED)
                p->attempts++;
            else if (kind == IB_MARKER_LOG_RELEASED)
                p->in_flight = false;
            else if (kind == IB_MARKER_LOG_ENDED) {
                p->attempts = 0;
                p->in_flight = false;
            } else {
                p->marked = true;
                p->in_flight = false;
                p->fingerprint = entries[i].fingerprint;
            }
        }
        apply(t, kind, (uint64_t)r / 100, entries, n);
    }
    assert_int_equal(ib_marker_table_stats_get(t).pairs, nmodel);
    for (size_t i = 0; i < nmodel; i++) {
        ib_pair_state s = ib_marker_table_lookup(t, two_names[model[i].consumer], model[i].id);
        assert_true(s.known);
        assert_int_equal(s.marked, model[i].marked);
        assert_int_equal(s.attempts, model[i].attempts);
        assert_int_equal(s.in_flight, model[i].in_flight);
        assert_true(s.fingerprint == model[i].fingerprint);
    }
    ib_marker_table_free(t);
    free(model);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_record_bytes_and_back),      cmocka_unit_test(test_each_rule_refuses),
    cmocka_unit_test(test_encode_refuses_bad_records), cmocka_unit_test(test_table_adds_records_up),
    cmocka_unit_test(test_table_matches_a_model),
};

IB_TEST_MAIN(tests)
