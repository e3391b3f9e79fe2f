/* SPDX-License-Identifier: Apache-2.0 */
/* Adoptable in an afternoon (issue 33): the defaults a new user meets,
 * against a real nats-server and real ibus processes. Ids the product
 * makes are accepted by default, and --uuid-versions narrows or widens
 * the set. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib_test.h"
#include "it_markers.h"
#include "it_support.h"
#include <infinity_bus/idempotency.h>
#include <infinity_bus/recorder.h>

#define UUID4 "0f8fad5bd9cb469fa16570867728950e"
#define UUID7 "018f3c5e7d2a7b3c8d4e5f60718293a4"
#define KEY "card-charge-good-1"
/* where the three events land in the stream, published in this order */
#define SEQ_UUID8 2
#define SEQ_UUID7 3

/* The events stream, made as an operator would. */
static void make_stream(it_env *e)
{
    assert_true(it_stream_add(&e->server, IT_STREAM, IT_SUBJECTS, 0));
}

/* Runs durable `durable` with the audit plugin (its own file) and the
 * extra flags (NULL-terminated) until the consumer is idle, then stops it. */
static void drain_with(it_env *e, const char *durable, ...)
{
    char path[PATH_MAX], name[64];
    it_argv a;
    va_list ap;
    it_argv_run(&a, e, durable);
    it_argv_plugin(&a, "audit", NULL);
    snprintf(name, sizeof(name), "%s.audit", durable);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(path, e, name));
    va_start(ap, durable);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    it_proc host;
    assert_true(it_spawn(&host, e, durable, &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
    it_finish_hosts(e, durable, &host, 1, it_timeout(60000));
}

/* Whether durable's audit file has a line for `id`. */
static bool audited(it_env *e, const char *durable, const char *id)
{
    char path[PATH_MAX], name[64];
    snprintf(name, sizeof(name), "%s.audit", durable);
    char *text = it_file_read(NULL, it_path(path, e, name));
    bool found = text != NULL && strstr(text, id) != NULL;
    free(text);
    return found;
}

/* The dead letters of `durable` of the event at stream sequence `seq` (an
 * id that does not validate is not named in a dead letter), each checked
 * to be invalid-id; the last one's Ibus-Error goes into `error`. */
static size_t dead_letters_of(it_env *e, const char *durable, unsigned seq, char *error, size_t cap)
{
    char stream[64], want[24];
    it_msg *msgs = NULL;
    snprintf(stream, sizeof(stream), "DLQ_%s", durable);
    snprintf(want, sizeof(want), "%u", seq);
    size_t n = it_stream_read_all(&msgs, &e->server, stream), found = 0;
    for (size_t i = 0; i < n; i++) {
        const char *got = it_msg_header(&msgs[i], "Ibus-Stream-Seq");
        if (got == NULL || strcmp(got, want) != 0)
            continue;
        found++;
        assert_string_equal(it_msg_header(&msgs[i], "Ibus-Reason"), "invalid-id");
        if (error != NULL)
            snprintf(error, cap, "%s", it_msg_header(&msgs[i], "Ibus-Error"));
    }
    it_msgs_free(msgs, n);
    return found;
}

/* Item 2: a default ibus run handles the uuid4 of a producer and the uuid8
 * that publish --key derives; a uuid7 is dead-lettered as invalid-id,
 * naming its version and the accepted ones. --uuid-versions 4 narrows the
 * set (the uuid8 is refused too), 4,7,8 widens it; a bad list is exit 2. */
static void product_ids_accepted_by_default(void **state)
{
    it_env *e = *state;
    char derived[IB_EVENT_ID_SIZE], error[512];
    assert_int_equal(ib_event_id_derive(derived, IB_EVENT_ID_NAMESPACE, KEY, strlen(KEY), NULL),
                     IB_OK);
    make_stream(e);
    assert_int_equal(
        it_publish(NULL, e, NULL, "--type", "order.created", "--id", UUID4, "{}", NULL), 0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.created", "--key", KEY, "{}", NULL),
                     0);
    /* publish says what a default consumer will do with a uuid7 */
    char *err, *out;
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "publish", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_addl(&a, "--type", "order.created", "--id", UUID7, "{}", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "publish7", &a), 0);
    it_assert_contains(err, "ibus publish: id " UUID7 " is a UUID version 7: a default ibus run "
                            "accepts versions 4 and 8 and dead-letters it as invalid-id (start the "
                            "consumers with --uuid-versions 4,7,8)");
    free(err);
    free(out);
    it_argv_free(&a);

    drain_with(e, "dflt", NULL);
    assert_true(audited(e, "dflt", UUID4));
    assert_true(audited(e, "dflt", derived));
    assert_false(audited(e, "dflt", UUID7));
    assert_int_equal(dead_letters_of(e, "dflt", SEQ_UUID8, NULL, 0), 0);
    assert_int_equal(dead_letters_of(e, "dflt", SEQ_UUID7, error, sizeof(error)), 1);
    it_assert_contains(error, "id is a UUID version 7, not one of the accepted versions 4,8");

    drain_with(e, "narrow", "--uuid-versions", "4", NULL);
    assert_true(audited(e, "narrow", UUID4));
    assert_false(audited(e, "narrow", derived));
    assert_int_equal(dead_letters_of(e, "narrow", SEQ_UUID8, error, sizeof(error)), 1);
    it_assert_contains(error, "id is a UUID version 8, not one of the accepted versions 4");
    assert_int_equal(dead_letters_of(e, "narrow", SEQ_UUID7, NULL, 0), 1);

    drain_with(e, "wide", "--uuid-versions", "4,7,8", NULL);
    assert_true(audited(e, "wide", UUID4));
    assert_true(audited(e, "wide", derived));
    assert_true(audited(e, "wide", UUID7));
    assert_int_equal(it_stream_count(&e->server, "DLQ_wide"), 0);

    it_argv_run(&a, e, "bad");
    it_argv_plugin(&a, "audit", "file=x");
    it_argv_addl(&a, "--uuid-versions", "4,9", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "bad", &a), 2);
    it_assert_contains(err, "ibus run: --uuid-versions: expected UUID versions 1-8 separated by "
                            "commas (4,8) or any, got '4,9'");
    free(err);
    free(out);
    it_argv_free(&a);
    it_done(e);
}

static void assert_totals(const it_published *p, long published, long unique, long duplicates,
                          long failed)
{
    if (p->published != published || p->unique != unique || p->duplicates != duplicates ||
        p->failed != failed)
        fail_msg("published=%ld unique=%ld duplicates=%ld failed=%ld, want %ld %ld %ld %ld",
                 p->published, p->unique, p->duplicates, p->failed, published, unique, duplicates,
                 failed);
}

/* Item 6: counts are right in every mode. JSON lines with 50 ids, 10 of
 * them sent twice, are 50 unique events and 10 duplicates (the bug said
 * unique=60 duplicates=0); arguments sharing one --key are one event;
 * --count with --duplicates adds up; every message reached the stream. */
static void publish_counts_repeated_ids(void **state)
{
    it_env *e = *state;
    char path[PATH_MAX], **ids = NULL, *err;
    it_published pub;
    make_stream(e);
    assert_true(it_make_ids(&ids, 60, it_path(path, e, "ids.txt")));
    for (size_t i = 50; i < 60; i++)
        snprintf(ids[i], IB_EVENT_ID_SIZE, "%s", ids[i - 50]); /* ids 0-9 again */
    assert_true(it_write_jsonl(it_path(path, e, "events.jsonl"), ids, 60, "order.created", "{}"));
    it_lines_free(ids, 60);
    assert_int_equal(it_publish_capture(&pub, &err, e, path, NULL), 0);
    assert_totals(&pub, 60, 50, 10, 0);
    free(err);

    assert_int_equal(it_publish_capture(&pub, &err, e, NULL, "--type", "order.paid", "--key", KEY,
                                        "a", "b", "c", NULL),
                     0);
    assert_totals(&pub, 3, 1, 2, 0);
    free(err);

    assert_int_equal(it_publish_capture(&pub, &err, e, NULL, "--type", "order.paid", "--count",
                                        "200", "--duplicates", "0.25", "--seed", "7", NULL),
                     0);
    assert_int_equal(pub.unique, 200);
    assert_true(pub.duplicates > 0);
    assert_totals(&pub, 200 + pub.duplicates, 200, pub.duplicates, 0);
    free(err);
    assert_int_equal(it_stream_count(&e->server, IT_STREAM), (uint64_t)(60 + 3 + pub.published));
    it_done(e);
}

/* Item 6: --raw publishes where an event would go: <prefix>.<type>, or
 * <prefix>.raw without --type (it went to events.raw whatever was said). */
static void publish_raw_honours_prefix_and_type(void **state)
{
    it_env *e = *state;
    char *err;
    it_published pub;
    assert_true(it_stream_add(&e->server, "ORDERS", "orders.>", 0));
    assert_int_equal(it_publish_capture(&pub, &err, e, NULL, "--raw", "--prefix", "orders",
                                        "--type", "order.created", "not an event", NULL),
                     0);
    assert_totals(&pub, 1, 0, 0, 0);
    free(err);
    assert_int_equal(
        it_publish_capture(&pub, &err, e, NULL, "--raw", "--prefix", "orders", "bytes", NULL), 0);
    free(err);
    it_msg m;
    assert_true(it_stream_get(&m, &e->server, "ORDERS", 1));
    assert_string_equal(m.subject, "orders.order.created");
    assert_int_equal(m.len, strlen("not an event"));
    it_msg_clear(&m);
    assert_true(it_stream_get(&m, &e->server, "ORDERS", 2));
    assert_string_equal(m.subject, "orders.raw");
    it_msg_clear(&m);
    it_done(e);
}

/* Item 6: errors name the subject and count as failed. No stream on the
 * subject: the server's "no responders" becomes what to do about it. A
 * subject something listens on without answering: the publishes time out
 * at --ack-timeout and each counts as failed (the bug printed failed=0). */
static void publish_errors_name_the_subject(void **state)
{
    it_env *e = *state;
    char *err;
    it_published pub;
    make_stream(e);
    assert_int_equal(
        it_publish_capture(&pub, &err, e, NULL, "--prefix", "nowhere", "--type", "t", "{}", NULL),
        1);
    assert_totals(&pub, 1, 1, 0, 1);
    it_assert_contains(err, "ibus publish: nowhere.t: no stream captures this subject (No "
                            "responders available for request): create one whose subjects match "
                            "it");
    free(err);

    natsSubscription *silent = NULL;
    assert_int_equal(natsConnection_SubscribeSync(&silent, it_server_client(&e->server), "held.>"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(it_server_client(&e->server)), NATS_OK);
    assert_int_equal(it_publish_capture(&pub, &err, e, NULL, "--prefix", "held", "--type", "t",
                                        "--ack-timeout", "1s", "{}", "{}", NULL),
                     1);
    assert_totals(&pub, 2, 2, 0, 2);
    it_assert_contains(err,
                       "ibus publish: 2 publishes not acknowledged within --ack-timeout 1000ms "
                       "(subjects held.t, held.t): the stream may or may not have stored them");
    free(err);
    natsSubscription_Destroy(silent);
    it_done(e);
}

#define DAY_MS (86400LL * 1000)
#define ADOPT_CONSUMER "adopt/audit/audit"

/* Asserts stream `name`'s MaxAge (ms), MaxBytes and discard policy. */
static void assert_limits(it_env *e, const char *name, int64_t age_ms, int64_t bytes,
                          jsDiscardPolicy discard)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, it_server_js(&e->server), name, NULL, &jerr), NATS_OK);
    int64_t have_bytes = si->Config->MaxBytes < 0 ? 0 : si->Config->MaxBytes; /* -1: none */
    if (si->Config->MaxAge != age_ms * 1000000LL || have_bytes != bytes ||
        si->Config->Discard != discard)
        fail_msg("stream %s: MaxAge %lldns MaxBytes %lld discard %d", name,
                 (long long)si->Config->MaxAge, (long long)si->Config->MaxBytes,
                 (int)si->Config->Discard);
    jsStreamInfo_Destroy(si);
}

/* Item 5: --create without a word about retention gives the event stream
 * a MaxAge of 7 days and the dead-letter stream 30 days and 1 GiB (new
 * dead letters refused when full, never old ones dropped), says so, and
 * the markers follow the stream's MaxAge (the floor). */
static void create_gives_default_retention(void **state)
{
    it_env *e = *state;
    char path[PATH_MAX];
    it_argv a;
    it_argv_run(&a, e, "adopt");
    it_argv_plugin(&a, "audit", NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
    it_argv_addl(&a, "--idle-exit", "1s", NULL);
    char *err, *out;
    assert_int_equal(it_run_capture(&err, &out, e, "defaults", &a), 0);
    it_argv_free(&a);
    assert_limits(e, IT_STREAM, 7 * DAY_MS, 0, js_DiscardOld);
    assert_limits(e, "DLQ_adopt", 30 * DAY_MS, 1024LL * 1024 * 1024, js_DiscardNew);
    it_assert_contains(err, "\"msg\":\"stream created\",\"stream\":\"EVENTS\",\"subjects\":"
                            "\"events.>\",\"max_age_ms\":604800000,\"max_bytes\":0,\"discard\":"
                            "\"old\"");
    it_assert_contains(err, "\"msg\":\"stream created\",\"stream\":\"DLQ_adopt\",\"subjects\":"
                            "\"ibus.dlq.adopt\",\"max_age_ms\":2592000000,\"max_bytes\":1073741824,"
                            "\"discard\":\"new\"");
    it_assert_contains(err,
                       "\"msg\":\"retention follows the stream's MaxAge\",\"stream\":\"EVENTS\","
                       "\"retention_ms\":604800000,\"floor_ms\":604800000");
    free(err);
    free(out);
    it_done(e);
}

/* Item 5: the automatic retention prunes: with --stream-max-age 2h,
 * markers 3 hours old go at start-up and fresh ones stay; `ibus markers
 * prune` accepts the stream --create made. A stream without MaxAge keeps
 * markers for ever, and the host says so. */
static void automatic_retention_prunes(void **state)
{
    it_env *e = *state;
    char path[PATH_MAX];
    it_seed_markers(e, ADOPT_CONSUMER, 1, 30, 3 * 3600 * 1000);
    it_seed_markers(e, ADOPT_CONSUMER, 2, 20, 60 * 1000);
    int port = it_free_port();
    it_argv a;
    it_argv_run(&a, e, "adopt");
    it_argv_plugin(&a, "audit", NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
    it_argv_addf(&a, "--http=127.0.0.1:%d", port);
    it_argv_addl(&a, "--stream-max-age", "2h", NULL);
    it_proc host;
    assert_true(it_spawn(&host, e, "pruning", &a));
    it_argv_free(&a);
    assert_true(it_wait_metric(e, port, "ibus_markers_pruned_total", 30, 30000) == 30);
    assert_true(it_wait_metric(e, port, "ibus_markers", 20, 30000) == 20);
    assert_true(it_proc_signal(&host, SIGTERM));
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), 0);
    assert_true(it_file_contains(host.err_path, "\"retention_ms\":7200000,\"floor_ms\":7200000"));

    /* the same file on a stream without MaxAge: nothing pruned, and said */
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"other.>"};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = "FOREVER";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, it_server_js(&e->server), &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    it_argv_run(&a, e, "forever");
    it_argv_addl(&a, "--stream", "FOREVER", "--idle-exit", "1s", NULL);
    it_argv_plugin(&a, "audit", NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
    char *err, *out;
    assert_int_equal(it_run_capture(&err, &out, e, "forever", &a), 0);
    it_argv_free(&a);
    it_assert_contains(err,
                       "\"level\":\"warn\",\"msg\":\"markers are kept for ever: the stream has "
                       "no MaxAge");
    free(err);
    free(out);
    it_done(e);
}

/* Item 7: the small things a first user meets. --check loads the example
 * plugins without creating their files; --plugin NAME is found in the
 * plugin directory; --recorder's help names kv:; `ibus dlq` on a durable
 * with no dead-letter stream says so before printing any table header. */
static void small_things_said_right(void **state)
{
    it_env *e = *state;
    char path[PATH_MAX], audit[PATH_MAX], flaky[PATH_MAX], dir[PATH_MAX];
    char *err, *out;
    snprintf(dir, sizeof(dir), "%s", it_plugin("audit"));
    *strrchr(dir, '/') = '\0';
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--check", "--plugin", "audit", "--plugin", "flaky.so",
                 "--plugin-dir", dir, NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(audit, e, "audit.log"));
    it_argv_addf(&a, "--plugin-config=flaky=file=%s", it_path(flaky, e, "flaky.log"));
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(path, e, "markers.db"));
    /* the build tree's trust is not the point here (a umask 002 checkout) */
    it_argv_add(&a, "--allow-insecure-plugins");
    int st = it_run_capture(&err, &out, e, "check", &a);
    if (st != 0)
        fail_msg("--check: exit %d\n%s%s", st, out, err);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof(want), "plugin audit 1.0.0 %s/audit.so\n", dir);
    it_assert_contains(out, want);
    snprintf(want, sizeof(want), "plugin flaky 1.0.0 %s/flaky.so\n", dir);
    it_assert_contains(out, want);
    assert_int_equal(access(audit, F_OK), -1);
    assert_int_equal(access(flaky, F_OK), -1);
    assert_int_equal(access(path, F_OK), -1);
    free(err);
    free(out);
    it_argv_free(&a);

    /* a file the plugin could not create is said by --check, exit 2 */
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--check", "--plugin", "audit", "--plugin-dir", dir,
                 "--recorder", "memory:", "--allow-insecure-plugins", NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(audit, e, "nodir/audit.log"));
    assert_int_equal(it_run_capture(&err, &out, e, "check-nodir", &a), 2);
    it_assert_contains(err, "nodir/audit.log: directory ");
    assert_null(strstr(out, "check passed"));
    free(err);
    free(out);
    it_argv_free(&a);

    /* a name that is not in the directory */
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--check", "--plugin", "audti", "--plugin-dir", dir, NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "typo-plugin", &a), 2);
    snprintf(want, sizeof(want), "ibus run: --plugin audti: no audti.so in the plugin directory %s",
             dir);
    it_assert_contains(err, want);
    free(err);
    free(out);
    it_argv_free(&a);

    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--help", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "help", &a), 0);
    it_assert_contains(out, "kv:BUCKET");
    free(err);
    free(out);
    it_argv_free(&a);

    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "dlq", "--durable", "typo", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_add(&a, "list");
    assert_int_equal(it_run_capture(&err, &out, e, "dlq-typo", &a), 2);
    assert_string_equal(out, "");
    it_assert_contains(err, "DLQ_typo");
    free(err);
    free(out);
    it_argv_free(&a);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(product_ids_accepted_by_default, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(publish_counts_repeated_ids, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(publish_raw_honours_prefix_and_type, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(publish_errors_name_the_subject, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(create_gives_default_retention, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(automatic_retention_prunes, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(small_things_said_right, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
