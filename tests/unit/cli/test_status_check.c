/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: what needs attention, judged from made-up reports (one rule
 * broken at a time, each with the option that fixes it), the ages people
 * read, and the JSON scripts read. The report against a real server is
 * tests/integration/it_status.py. */
#include "ib_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

#define NOW 1800000000000LL

/* A healthy durable: a pull consumer that delivered a second ago and has
 * nothing waiting, a dead-letter stream, settings as ibus run expects. */
static void healthy(ib_status_report *r)
{
    memset(r, 0, sizeof(*r));
    r->now_ms = NOW;
    snprintf(r->stream.name, sizeof(r->stream.name), "ORDERS");
    r->stream.exists = true;
    r->stream.messages = 10;
    r->stream.max_age_ms = 3600000;
    ib_status_consumer *c = &r->consumer;
    snprintf(c->durable, sizeof(c->durable), "billing");
    c->exists = c->pull = c->explicit_ack = true;
    c->ack_wait_ms = 30000;
    c->max_deliver = -1;
    c->waiting = 1;
    c->delivered_ms = NOW - 1000;
    snprintf(r->dlq.subject, sizeof(r->dlq.subject), "ibus.dlq.billing");
    snprintf(r->dlq.stream, sizeof(r->dlq.stream), "DLQ_billing");
    r->dlq.complete = true;
    snprintf(r->markers.recorder, sizeof(r->markers.recorder), "sqlite:processed.db");
    r->markers.kind = "sqlite";
    r->markers.visible = true;
    r->expect = (ib_status_expect){.ack_wait_ms = 30000, .max_deliver = 5, .retry_max_ms = 60000};
}

/* The one finding of `r` after the checks: its code and fix. */
static const ib_status_finding *only(ib_status_report *r)
{
    ib_status_check(r);
    if (r->nfindings != 1)
        fail_msg("%zu findings, the first %s", r->nfindings,
                 r->nfindings > 0 ? r->findings[0].message : "-");
    return &r->findings[0];
}

static void a_healthy_durable_has_no_finding(void **state)
{
    (void)state;
    ib_status_report r;
    healthy(&r);
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
    /* waiting messages with a puller, or a recent delivery, are work */
    r.consumer.pending = 500;
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
    r.consumer.waiting = 0;
    r.consumer.delivered_ms = NOW - 29000;
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
}

static void not_pulling(void **state)
{
    (void)state;
    ib_status_report r;
    healthy(&r);
    r.consumer.pending = 50;
    r.consumer.waiting = 0;
    r.consumer.delivered_ms = NOW - 31000;
    const ib_status_finding *f = only(&r);
    assert_string_equal(f->code, "not-pulling");
    assert_non_null(strstr(f->message, "50 messages wait, nothing was delivered for 31s"));
    healthy(&r);
    r.consumer.pending = 1;
    r.consumer.waiting = 0;
    r.consumer.delivered_ms = 0;
    assert_non_null(strstr(only(&r)->message, "nothing was ever delivered"));
}

static ib__consumer_summary one_identity(void)
{
    static char name[] = "billing/audit/audit";
    ib__consumer_summary s = {
        .consumer = name, .markers = 3, .oldest_ms = NOW - 5000, .newest_ms = NOW - 1000};
    return s;
}

/* A claim held past its lease for more than an AckWait is stuck; one
 * that ended more recently is a redelivery about to come. */
static void stuck_claims(void **state)
{
    (void)state;
    ib_status_report r;
    ib__consumer_summary s = one_identity();
    s.claims = s.claims_ended = 2;
    strcpy(s.lease_left_min_owner, "billing@host/not-a-real-token");
    s.lease_left_min_ms = -30001;
    healthy(&r);
    r.markers.v = &s;
    r.markers.n = 1;
    const ib_status_finding *f = only(&r);
    assert_string_equal(f->code, "stuck-claims");
    assert_non_null(strstr(f->message, "billing/audit/audit holds 2 claims past their lease, "
                                       "the oldest ended 30s ago (held by billing@host/"
                                       "not-a-real-token: cannot tell whether it runs)"));
    s.lease_left_min_ms = -29999;
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
}

static void exhausted_events(void **state)
{
    (void)state;
    ib_status_report r;
    ib__consumer_summary s = one_identity();
    s.attempted = 4;
    s.exhausted = 1;
    s.claims = 3; /* the other three run now */
    healthy(&r);
    r.markers.v = &s;
    r.markers.n = 1;
    const ib_status_finding *f = only(&r);
    assert_string_equal(f->code, "exhausted");
    assert_non_null(strstr(f->message, "billing/audit/audit: 1 events used their 5 attempts"));
}

/* Issue 45: work a run left unfinished is not healthy. Keys attempted and
 * not marked that nobody holds wait for a retry; those held run now and
 * the exhausted are reported as such. Messages delivered and never acked
 * while nobody pulls wait for a redelivery. */
static void unfinished_events(void **state)
{
    (void)state;
    ib_status_report r;
    ib__consumer_summary s = one_identity();
    s.attempted = 2;
    s.claims = 2;
    healthy(&r);
    r.markers.v = &s;
    r.markers.n = 1;
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
    s.attempted = 13;
    s.claims = 0;
    const ib_status_finding *f = only(&r);
    assert_string_equal(f->code, "unfinished");
    assert_non_null(strstr(f->message, "billing/audit/audit: 13 events were attempted and are "
                                       "not marked, and no process holds them: they wait for a "
                                       "retry"));
    s.claims = 2;
    s.exhausted = 1;
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 2);
    assert_string_equal(r.findings[0].code, "unfinished");
    assert_non_null(strstr(r.findings[0].message, ": 10 events were attempted"));
    assert_string_equal(r.findings[1].code, "exhausted");

    healthy(&r);
    r.consumer.ack_pending = r.consumer.redelivered = 18;
    r.consumer.waiting = 0;
    r.consumer.delivered_ms = NOW - 31000;
    f = only(&r);
    assert_string_equal(f->code, "unfinished");
    assert_non_null(strstr(f->message, "18 messages were delivered and not acked (18 of them "
                                       "more than once), nothing was delivered for 31s and no "
                                       "pull request waits"));
    r.consumer.pending = 50; /* not-pulling says it */
    assert_string_equal(only(&r)->code, "not-pulling");
    r.consumer.pending = 0;
    r.consumer.waiting = 1; /* a process pulls: they come back to it */
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
    r.consumer.waiting = 0;
    r.consumer.delivered_ms = NOW - 29000; /* within an AckWait: a batch may be running */
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
}

static void dead_letters_and_their_stream(void **state)
{
    (void)state;
    ib_status_report r;
    healthy(&r);
    r.dlq.count = 3;
    const ib_status_finding *f = only(&r);
    assert_string_equal(f->code, "dead-letters");
    assert_string_equal(f->fix, "ibus dlq --stream DLQ_billing");
    assert_non_null(strstr(f->message, "3 dead letters of billing wait in DLQ_billing"));
    r.dlq.complete = false;
    assert_non_null(strstr(only(&r)->message, "at least 3 dead letters"));
    healthy(&r);
    r.dlq.stream[0] = '\0';
    f = only(&r);
    assert_string_equal(f->code, "no-dead-letter-stream");
    assert_string_equal(f->fix, "--create");
    healthy(&r);
    snprintf(r.dlq.error, sizeof(r.dlq.error), "timeout");
    assert_string_equal(only(&r)->code, "dead-letters-unreadable");
    healthy(&r);
    snprintf(r.markers.error, sizeof(r.markers.error), "recorder sqlite:x.db: no such file");
    f = only(&r);
    assert_string_equal(f->code, "markers-unreadable");
    assert_string_equal(f->fix, "--recorder");
}

/* Settings that disagree with ibus run's, each with its fix. */
static void settings_that_disagree(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t ack_wait, max_deliver, want_md, retention, max_age;
        const char *kind, *code, *fix;
    } cases[] = {
        {"AckWait", 2000, -1, 5, 0, 3600000, "sqlite", "ack-wait", "--ack-wait 2s"},
        {"AckWait 90s", 90000, -1, 5, 0, 3600000, "sqlite", "ack-wait", "--ack-wait 1m30s"},
        {"MaxDeliver other", 30000, 3, 5, 0, 3600000, "sqlite", "max-deliver", "--max-deliver 3"},
        {"MaxDeliver same", 30000, 5, 5, 0, 3600000, "sqlite", "max-deliver", "--create"},
        {"retention below MaxAge", 30000, -1, 5, 600000, 3600000, "sqlite", "retention",
         "--retention 1h"},
        {"retention, no MaxAge", 30000, -1, 5, 600000, 0, "sqlite", "retention", "--retention 0"},
        {"retention with kv", 30000, -1, 5, 7200000, 3600000, "kv", "retention", "--retention 0"},
        {"retention above MaxAge", 30000, -1, 5, 7200000, 3600000, "sqlite", NULL, NULL},
        {"MaxDeliver unlimited", 30000, 0, 5, 0, 0, "sqlite", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ib_status_report r;
        healthy(&r);
        r.consumer.ack_wait_ms = cases[i].ack_wait;
        r.consumer.max_deliver = cases[i].max_deliver;
        r.expect.max_deliver = cases[i].want_md;
        r.expect.retention_ms = cases[i].retention;
        r.stream.max_age_ms = cases[i].max_age;
        r.markers.kind = cases[i].kind;
        ib_status_check(&r);
        if (cases[i].code == NULL) {
            if (r.nfindings != 0)
                fail_msg("case '%s': %s", cases[i].name, r.findings[0].message);
            continue;
        }
        if (r.nfindings != 1 || strcmp(r.findings[0].code, cases[i].code) != 0 ||
            strcmp(r.findings[0].fix, cases[i].fix) != 0)
            fail_msg("case '%s': %zu findings, %s [%s]", cases[i].name, r.nfindings,
                     r.nfindings > 0 ? r.findings[0].message : "-",
                     r.nfindings > 0 ? r.findings[0].fix : "-");
    }
}

static void replicas_behind(void **state)
{
    (void)state;
    ib_status_report r;
    healthy(&r);
    r.stream.replicas =
        (ib_status_replicas){.total = 3, .current = 2, .leader = "n1", .behind = "n3 (offline)"};
    const ib_status_finding *f = only(&r);
    assert_string_equal(f->code, "replicas");
    assert_non_null(strstr(f->message, "stream ORDERS: 2 of 3 replicas current (behind: n3"));
    healthy(&r);
    r.markers.bucket = (ib_status_replicas){.total = 3, .current = 0};
    assert_non_null(strstr(only(&r)->message, "has no leader"));
}

/* A consumer ibus run cannot bind gets that one finding, nothing more. */
static void a_push_consumer_is_not_ibus_runs(void **state)
{
    (void)state;
    ib_status_report r;
    healthy(&r);
    r.consumer.pull = false;
    r.consumer.ack_wait_ms = 1000;
    r.dlq.count = 7;
    assert_string_equal(only(&r)->code, "not-pull");
}

static void ages_for_people(void **state)
{
    (void)state;
    static const struct {
        int64_t ms;
        const char *want;
    } c[] = {{-5, "0ms"},         {0, "0ms"},          {850, "850ms"},          {1000, "1s"},
             {42999, "42s"},      {60000, "1m"},       {310000, "5m10s"},       {3600000, "1h"},
             {12000000, "3h20m"}, {187200000, "2d4h"}, {86400000 + 59000, "1d"}};
    char buf[40];
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        assert_string_equal(ib_status_age(buf, sizeof(buf), c[i].ms), c[i].want);
}

/* The text says healthy or not, and shows each finding with its fix; the
 * JSON carries the same, with times as text and durations in ms. */
static void text_and_json(void **state)
{
    (void)state;
    ib_status_report r;
    ib__consumer_summary s = one_identity();
    healthy(&r);
    r.markers.v = &s;
    r.markers.n = 1;
    r.consumer.ack_wait_ms = 2000;
    r.dlq.count = 2;
    r.dlq.by_reason[IB_DLQ_REJECTED] = 2;
    r.dlq.oldest_ms = NOW - 60000;
    ib_status_check(&r);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ib_status_print_text(out, &r);
    fclose(out);
    assert_non_null(strstr(text, "durable billing on stream ORDERS: attention needed\n"));
    assert_non_null(strstr(text, "billing/audit/audit: markers 3 (oldest 5s ago, newest 1s ago)"));
    assert_non_null(strstr(text, "DLQ_billing: 2 (rejected 2), oldest 1m ago"));
    assert_non_null(strstr(text, "[fix: --ack-wait 2s]"));
    free(text);

    json_t *o = ib_status_json(&r);
    assert_non_null(o);
    assert_false(json_is_true(json_object_get(o, "healthy")));
    json_t *c = json_object_get(o, "consumer");
    assert_int_equal(json_integer_value(json_object_get(c, "ack_wait_ms")), 2000);
    assert_int_equal(json_integer_value(json_object_get(c, "delivered_age_ms")), 1000);
    json_t *id = json_array_get(json_object_get(json_object_get(o, "markers"), "identities"), 0);
    assert_string_equal(json_string_value(json_object_get(id, "consumer")), "billing/audit/audit");
    assert_true(json_is_null(json_object_get(id, "lease_left_min_ms")));
    json_t *dl = json_object_get(o, "dead_letters");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(dl, "by_reason"), "rejected")), 2);
    assert_string_equal(json_string_value(json_object_get(dl, "oldest_time")),
                        "2027-01-15T07:59:00.000Z");
    json_t *att = json_object_get(o, "attention");
    assert_int_equal(json_array_size(att), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(att, 1), "fix")),
                        "--ack-wait 2s");
    json_decref(o);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_healthy_durable_has_no_finding),
    cmocka_unit_test(not_pulling),
    cmocka_unit_test(stuck_claims),
    cmocka_unit_test(exhausted_events),
    cmocka_unit_test(unfinished_events),
    cmocka_unit_test(dead_letters_and_their_stream),
    cmocka_unit_test(settings_that_disagree),
    cmocka_unit_test(replicas_behind),
    cmocka_unit_test(a_push_consumer_is_not_ibus_runs),
    cmocka_unit_test(ages_for_people),
    cmocka_unit_test(text_and_json),
};

IB_TEST_MAIN(tests)
