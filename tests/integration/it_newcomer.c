/* SPDX-License-Identifier: Apache-2.0 */
/* A newcomer's first hour (issue 25): what a first run says when it goes
 * wrong, against real processes. Each message test asserts the exact text
 * where the text is the point: it must name the thing, the reason and the
 * fix (a flag where one fixes it). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ib_test.h"
#include "it_support.h"
#include <infinity_bus/idempotency.h>
#include <infinity_bus/recorder.h>

#define AUDIT_TYPES "order.created,order.paid,payment.settled"

/* `ibus run` with the audit plugin, text logs and a memory: recorder,
 * talking to `url`; the test adds its own flags. */
static void argv_local(it_argv *a, it_env *e, const char *url)
{
    char path[PATH_MAX];
    it_argv_init(a);
    it_argv_addl(a, it_ibus(), "run", "--nats-url", url, "--log-format", "text", NULL);
    it_argv_plugin(a, "audit", NULL);
    it_argv_addf(a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
}

/* Item 1: an unreachable server is said at once, naming the URL and the
 * error; reminders follow at a limited rate; /readyz says why. */
static void unreachable_server_is_said_at_once(void **state)
{
    it_env *e = *state;
    char url[64];
    int http = it_free_port();
    snprintf(url, sizeof(url), "nats://127.0.0.1:%d", it_free_port());
    it_argv a;
    argv_local(&a, e, url);
    it_argv_addl(&a, "--recorder", "memory:", NULL);
    it_argv_addf(&a, "--http=127.0.0.1:%d", http);
    it_proc p;
    assert_true(it_spawn(&p, e, "unreachable", &a));
    char first[160], again[160];
    snprintf(first, sizeof(first), "WARN cannot connect to NATS; retrying url=%s error=", url);
    snprintf(again, sizeof(again),
             "WARN still cannot connect to NATS; retrying url=%s error=", url);
    int64_t deadline = it_now_ms() + it_timeout(15000);
    while (!it_file_contains(p.err_path, again) && it_now_ms() < deadline)
        it_sleep_ms(100);
    assert_true(it_file_contains(p.err_path, first));
    assert_true(it_file_contains(p.err_path, again));

    char *body = NULL;
    assert_int_equal(it_http_get(&body, e, http, "/readyz"), 503);
    char want[160];
    snprintf(want, sizeof(want), "not ready: not connected to NATS at %s: ", url);
    assert_non_null(body);
    it_assert_contains(body, want);
    free(body);
    /* limited: the first reminder comes after 2 s, the next after 4 s more */
    char *log = it_file_read(NULL, p.err_path);
    size_t reminders = 0;
    for (const char *s = log; (s = strstr(s, "still cannot connect")) != NULL; s++)
        reminders++;
    assert_true(reminders <= 2);
    assert_null(strstr(log, "conn.c:")); /* no source location */
    free(log);
    /* stopped before it ever consumed: not a clean stop (issue 45) */
    assert_int_equal(it_proc_stop(&p, SIGTERM, it_timeout(10000)), 1);
    it_argv_free(&a);
    it_done(e);
}

/* Item 5: a missing stream is named as such, with --create. */
static void missing_stream_names_create(void **state)
{
    it_env *e = *state;
    it_argv a;
    argv_local(&a, e, e->server.url);
    it_argv_addl(&a, "--recorder", "memory:", "--stream", "NOPE", "--durable", "billing", NULL);
    char *err;
    assert_int_equal(it_run_capture(&err, NULL, e, "nostream", &a), 2);
    it_assert_contains(err, "ERROR stream NOPE does not exist: create it, or start ibus run with "
                            "--create (which also sets up consumer billing)");
    free(err);
    it_argv_free(&a);
    it_done(e);
}

/* Item 5: what a restart cannot fix is exit 2, and says how to fix it. */
static void configuration_errors_exit_2_naming_the_fix(void **state)
{
    it_env *e = *state;
    char path[PATH_MAX], *err;
    it_argv a;

    argv_local(&a, e, "nats://127.0.0.1:1");
    it_argv_addl(&a, "--recorder", "memory:", "--plugin-config", "audti=x", NULL);
    assert_int_equal(it_run_capture(&err, NULL, e, "config", &a), 2);
    it_assert_contains(err, "ERROR --plugin-config audti=...: no plugin named 'audti' is loaded "
                            "(loaded: audit); did you mean audit? use the name the plugin "
                            "declares");
    free(err);
    it_argv_free(&a);

    argv_local(&a, e, "nats://127.0.0.1:1");
    it_argv_addl(&a, "--nats-ur", "x", NULL);
    assert_int_equal(it_run_capture(&err, NULL, e, "typo", &a), 2);
    it_assert_contains(err, "ibus run: unknown option --nats-ur: did you mean --nats-url? (see "
                            "--help)");
    free(err);
    it_argv_free(&a);

    argv_local(&a, e, "127.0.0.1:notaport");
    assert_int_equal(it_run_capture(&err, NULL, e, "port", &a), 2);
    assert_string_equal(err, "ibus run: --nats-url: '127.0.0.1:notaport' has port 'notaport', "
                             "expected a number in 1..65535 (e.g. nats://127.0.0.1:4222)\n");
    free(err);
    it_argv_free(&a);

    argv_local(&a, e, "nats://127.0.0.1:1");
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(path, e, "nodir/markers.db"));
    assert_int_equal(it_run_capture(&err, NULL, e, "nodir", &a), 2);
    it_assert_contains(err, "/nodir does not exist (create it, or name a file in an existing "
                            "directory)");
    free(err);
    it_argv_free(&a);
    it_done(e);
}

/* Item 5: the library names its setting, ibus the flag. */
static void insecure_files_name_the_flags(void **state)
{
    it_env *e = *state;
    char plugin[PATH_MAX], db[PATH_MAX], *err;
    size_t len = 0;
    char *bytes = it_file_read(&len, it_plugin("audit"));
    assert_non_null(bytes);
    assert_true(it_file_write(it_path(plugin, e, "audit.so"), bytes, len));
    free(bytes);
    assert_int_equal(chmod(plugin, 0666), 0);
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--check", "--log-format", "text", "--plugin", plugin, NULL);
    assert_int_equal(it_run_capture(&err, NULL, e, "plugin", &a), 2);
    it_assert_contains(err, "audit.so: file is writable by group or others (mode 0666); fix with "
                            "chmod go-w or pass --allow-insecure-plugins (development only)");
    free(err);
    it_argv_free(&a);

    ib_recorder *r = NULL;
    char uri[PATH_MAX + 8];
    snprintf(uri, sizeof(uri), "sqlite:%s", it_path(db, e, "shared.db"));
    assert_int_equal(ib_recorder_open(&r, uri, NULL, NULL), IB_OK);
    ib_recorder_close(r);
    assert_int_equal(chmod(db, 0666), 0);
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", "--recorder", uri, "stats", NULL);
    assert_int_equal(it_run_capture(&err, NULL, e, "db", &a), 2);
    it_assert_contains(err, "is writable by group or others (mode 0666); fix with chown/chmod or "
                            "pass --allow-insecure-db");
    free(err);
    it_argv_free(&a);
    it_done(e);
}

/* One `ibus markers` call and what it must answer. */
typedef struct markers_case {
    const char *action, *consumer; /* consumer NULL: no --consumer */
    const char *id;                /* NULL: the action takes none */
    int exit;
    const char *err; /* must be in stderr; NULL: nothing asked */
} markers_case;

#define MARKED_ID "0f8fad5bd9cb469fa16570867728950e"
#define OTHER_ID "6f1c4b1a2b3c4d5e8f9a0b1c2d3e4f50"

/* Issue 33, item 1: identities match exactly, part by part. A typo in
 * any part, a prefix, a sibling of a known handler or an empty file is
 * exit 2 with the identities the file knows, for every action; stats and
 * prune refuse a --consumer they would ignore. */
static const markers_case identity_cases[] = {
    {"lookup", "bulk/once/charge", MARKED_ID, 0, NULL},
    {"lookup", "bulk/once/charge", OTHER_ID, 3, NULL},
    {"lookup", "bulk/once/chrage", MARKED_ID, 2,
     "did you mean bulk/once/charge? (its handler part differs)"},
    {"lookup", "bulk/onse/charge", MARKED_ID, 2,
     "did you mean bulk/once/charge? (its plugin part differs)"},
    {"lookup", "bulk/once", MARKED_ID, 2,
     "bulk/once is only the first 2 parts of bulk/once/charge"},
    {"lookup", "bulk/once/charge/x", MARKED_ID, 2, "it knows bulk/once/charge, bulk/once/refund"},
    {"lookup", "BULK/once/charge", MARKED_ID, 2, "(its durable part differs)"},
    {"forget", "bulk/once/chrage", MARKED_ID, 2, "has no markers of that identity"},
    {"forget", "bulk/once", MARKED_ID, 2, "has no markers of that identity"},
    {"list", "bulk/once/chrage", NULL, 2, "has no markers of that identity"},
    {"list", "bulk/once", NULL, 2, "has no markers of that identity"},
    {"list", "bulk/once/charge", NULL, 0, NULL},
    {"stats", "bulk/once/charge", NULL, 2, "ibus markers stats: --consumer does not apply"},
    {"prune", "bulk/once/charge", NULL, 2, "ibus markers prune: --consumer does not apply"},
};

/* Runs one case against `uri`; checks its exit and its message. */
static void run_identity_case(it_env *e, const char *uri, const markers_case *c)
{
    char *err, *out;
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", "--recorder", uri, NULL);
    if (c->consumer != NULL)
        it_argv_addl(&a, "--consumer", c->consumer, NULL);
    if (strcmp(c->action, "prune") == 0)
        it_argv_addl(&a, "--older-than", "30d", "--force", NULL);
    it_argv_add(&a, c->action);
    if (c->id != NULL)
        it_argv_add(&a, c->id);
    int st = it_run_capture(&err, &out, e, c->action, &a);
    if (st != c->exit)
        fail_msg("markers %s --consumer %s: exit %d, want %d\n%s%s", c->action, c->consumer, st,
                 c->exit, out, err);
    if (c->err != NULL)
        it_assert_contains(err, c->err);
    bool refused_identity =
        c->exit == 2 && strcmp(c->action, "stats") != 0 && strcmp(c->action, "prune") != 0;
    if (refused_identity && strstr(c->err, "it knows none") == NULL) {
        char want[PATH_MAX + 600];
        snprintf(want, sizeof(want),
                 "ibus markers %s: --consumer %s: %s has no markers of that identity; it knows "
                 "bulk/once/charge, bulk/once/refund",
                 c->action, c->consumer, uri);
        it_assert_contains(err, want);
        it_assert_contains(err,
                           "Identities match exactly, part by part: give the full "
                           "<durable>/<plugin>/<handler> identity, as 'plugin loaded' logs it");
    }
    free(err);
    free(out);
    it_argv_free(&a);
}

static void markers_refuse_unknown_identities(void **state)
{
    it_env *e = *state;
    char db[PATH_MAX], uri[PATH_MAX + 8], *err, *out;
    snprintf(uri, sizeof(uri), "sqlite:%s", it_path(db, e, "processed.db"));
    ib_recorder *r = NULL;
    assert_int_equal(ib_recorder_open(&r, uri, NULL, NULL), IB_OK);
    ib_recorder_close(r);

    /* an empty file knows no identity: nothing to guess from either */
    markers_case empty = {"lookup", "bulk/once/charge", MARKED_ID, 2, "it knows none."};
    run_identity_case(e, uri, &empty);

    assert_int_equal(ib_recorder_open(&r, uri, NULL, NULL), IB_OK);
    assert_int_equal(ib_recorder_mark(r, "bulk/once/charge", MARKED_ID, NULL), IB_OK);
    assert_int_equal(ib_recorder_mark(r, "bulk/once/refund", MARKED_ID, NULL), IB_OK);
    ib_recorder_close(r);
    for (size_t i = 0; i < sizeof(identity_cases) / sizeof(identity_cases[0]); i++)
        run_identity_case(e, uri, &identity_cases[i]);
    /* the refused forget changed nothing */
    assert_int_equal(ib_recorder_open(&r, uri, NULL, NULL), IB_OK);
    bool done = false;
    assert_int_equal(ib_recorder_is_processed(r, &done, "bulk/once/charge", MARKED_ID, NULL),
                     IB_OK);
    assert_true(done);
    /* a key with attempts counted is known by them, though never marked */
    ib_claim_info ci;
    ib_marker_key key = {"bulk/once/retry", OTHER_ID};
    ib_claim_request rq = {.owner = "it-newcomer", .lease_ms = 60000};
    assert_int_equal(ib_recorder_acquire_batch(r, &ci, &key, 1, &rq, NULL), IB_OK);
    assert_int_equal(ib_recorder_release_batch(r, &key, 1, "it-newcomer", NULL), IB_OK);
    ib_recorder_close(r);
    markers_case attempted = {"lookup", "bulk/once/retry", OTHER_ID, 3, NULL};
    run_identity_case(e, uri, &attempted);

    /* a marker store only an ibus run process can see is refused */
    static const char *const private_stores[] = {"memory:", "sqlite::memory:"};
    for (size_t i = 0; i < 2; i++) {
        it_argv a;
        it_argv_init(&a);
        it_argv_addl(&a, it_ibus(), "markers", "--recorder", private_stores[i], "stats", NULL);
        assert_int_equal(it_run_capture(&err, &out, e, "private", &a), 2);
        it_assert_contains(err, "keeps its markers inside each ibus run process");
        free(err);
        free(out);
        it_argv_free(&a);
    }

    /* a file that does not exist is refused, never created */
    assert_int_equal(it_marker_lookup(e, "bulk/once/charge", OTHER_ID), 2);
    char missing[PATH_MAX];
    assert_int_equal(access(it_path(missing, e, "markers.db"), F_OK), -1);
    char typo[PATH_MAX];
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", NULL);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(typo, e, "typo.db"));
    it_argv_add(&a, "stats");
    assert_int_equal(it_run_capture(&err, NULL, e, "typo", &a), 2);
    it_assert_contains(err, "typo.db: no such file (check the path; only ibus run creates a marker "
                            "file)");
    assert_int_equal(access(typo, F_OK), -1);
    free(err);
    it_argv_free(&a);
    it_done(e);
}

/* Items 4 and 6: --check loads the plugins and lists each handler with
 * its types and identity, without NATS and without creating the marker
 * file; `plugin loaded` lists the same. */
static void check_lists_handlers_without_nats(void **state)
{
    it_env *e = *state;
    char db[PATH_MAX], *err, *out;
    it_argv a;
    argv_local(&a, e, "nats://127.0.0.1:1");
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "markers.db"));
    it_argv_addl(&a, "--durable", "orders", "--check", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "check", &a), 0);
    it_assert_contains(out,
                       "handler audit/audit types=" AUDIT_TYPES " consumer=orders/audit/audit\n");
    it_assert_contains(out, "no file yet; ibus run creates it\n");
    it_assert_contains(out, "check passed: ibus run would start with this configuration (NATS not "
                            "contacted)\n");
    it_assert_contains(err, "plugin loaded plugin=audit version=1.0.0");
    it_assert_contains(err, "handlers=\"audit/audit types=" AUDIT_TYPES
                            " consumer=orders/audit/audit\"");
    assert_null(strstr(err, "NATS"));
    assert_int_equal(access(db, F_OK), -1);
    free(err);
    free(out);
    it_argv_free(&a);

    /* an existing file is opened; an override shows as the identity */
    ib_recorder *r = NULL;
    char uri[PATH_MAX + 8];
    snprintf(uri, sizeof(uri), "sqlite:%s", db);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, NULL), IB_OK);
    ib_recorder_close(r);
    argv_local(&a, e, "nats://127.0.0.1:1");
    it_argv_addl(&a, "--recorder", uri, "--consumer-name", "audit/audit=billing/audit", "--check",
                 NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "check2", &a), 0);
    it_assert_contains(out, "consumer=billing/audit\n");
    it_assert_contains(out, ": opened\n");
    free(err);
    free(out);
    it_argv_free(&a);

    /* a bad option is exit 2, still without NATS */
    argv_local(&a, e, "nats://127.0.0.1:1");
    it_argv_addl(&a, "--recorder", "memory:", "--consumer-name", "audit/nosuch=x", "--check", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "check3", &a), 2);
    assert_null(strstr(out, "check passed"));
    free(err);
    free(out);
    it_argv_free(&a);
    it_done(e);
}

/* Item 3: the manual page's examples as written: its run, with --create
 * --stream-max-age 30d --retention 30d, makes the stream its prune (and
 * that --retention) accepts. */
static void man_page_retention_examples_work(void **state)
{
    it_env *e = *state;
    char *err, *out, path[PATH_MAX];
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "help", "--man", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "man", &a), 0);
    it_assert_contains(out, "ibus run \\-\\-create \\-\\-stream EVENTS \\-\\-durable orders \\e\n"
                            "    \\-\\-stream\\-max\\-age 30d \\-\\-retention 30d \\e\n");
    it_assert_contains(
        out, "ibus markers \\-\\-older\\-than 30d \\-\\-stream EVENTS \\-\\-durable orders "
             "prune\n");
    free(err);
    free(out);
    it_argv_free(&a);

    /* the run example, with the test's server and files, and an idle exit */
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_addl(&a, "--create", "--stream", "EVENTS", "--durable", "orders", "--stream-max-age",
                 "30d", "--retention", "30d", "--idle-exit", "1s", "--log-format", "json", NULL);
    it_argv_plugin(&a, "audit", NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(path, e, "processed.db"));
    assert_int_equal(it_run_capture(&err, NULL, e, "kept", &a), 0);
    it_assert_contains(err, "\"msg\":\"stream created\",\"stream\":\"EVENTS\"");
    it_assert_contains(err, "\"max_age_ms\":2592000000");
    free(err);
    it_argv_free(&a);

    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, it_server_js(&e->server), "EVENTS", NULL, &jerr),
                     NATS_OK);
    assert_true(si->Config->MaxAge == 30LL * 86400 * 1000000000LL);
    jsStreamInfo_Destroy(si);

    /* the prune example */
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(path, e, "processed.db"));
    it_argv_addl(&a, "--older-than", "30d", "--stream", "EVENTS", "--durable", "orders", "prune",
                 NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "prune", &a), 0);
    assert_string_equal(out, "pruned=0\n");
    free(err);
    free(out);
    it_argv_free(&a);
    it_done(e);
}

/* Item 3: --stream-max-bytes reaches the created stream too. */
static void created_stream_has_max_bytes(void **state)
{
    it_env *e = *state;
    char *err, path[PATH_MAX];
    it_argv a;
    it_argv_run(&a, e, "sized");
    it_argv_plugin(&a, "audit", NULL);
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
    it_argv_addl(&a, "--stream-max-bytes", "1000000000", "--idle-exit", "1s", NULL);
    assert_int_equal(it_run_capture(&err, NULL, e, "sized", &a), 0);
    free(err);
    it_argv_free(&a);
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, it_server_js(&e->server), IT_STREAM, NULL, &jerr),
                     NATS_OK);
    assert_true(si->Config->MaxBytes == 1000000000LL);
    assert_true(si->Config->MaxAge == 7LL * 86400 * 1000000000LL); /* the default (issue 33) */
    jsStreamInfo_Destroy(si);
    it_done(e);
}

/* Items 7 and 8: --key derives the documented id; one id given to several
 * arguments is one unique event and its duplicates. */
static void publish_key_and_fixed_id(void **state)
{
    it_env *e = *state;
    char ids[PATH_MAX], want[IB_EVENT_ID_SIZE];
    it_published pub;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {IT_SUBJECTS};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = IT_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, it_server_js(&e->server), &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    assert_int_equal(it_publish(&pub, e, NULL, "--type", "order.created", "--key",
                                "evt_1NbV3Q2eZvKYlo2C", "--ids-file", it_path(ids, e, "ids"), "a",
                                "b", NULL),
                     0);
    assert_int_equal(pub.published, 2);
    assert_int_equal(pub.unique, 1);
    assert_int_equal(pub.duplicates, 1);
    char *text = it_file_read(NULL, ids);
    assert_int_equal(
        ib_event_id_derive(want, IB_EVENT_ID_NAMESPACE, "evt_1NbV3Q2eZvKYlo2C", 20, NULL), IB_OK);
    assert_string_equal(want, "53237e60d0088c8dba4231d408794e1b");
    assert_non_null(text);
    assert_string_equal(text, "53237e60d0088c8dba4231d408794e1b\n");
    free(text);

    assert_int_equal(it_publish(&pub, e, NULL, "--type", "order.created", "--id",
                                "0f8fad5bd9cb469fa16570867728950e", "a", "b", "c", NULL),
                     0);
    assert_int_equal(pub.unique, 1);
    assert_int_equal(pub.duplicates, 2);
    it_done(e);
}

/* Item 8: --max-deliver's help speaks of attempts, as the README does. */
static void max_deliver_help_counts_attempts(void **state)
{
    it_env *e = *state;
    char *err, *out;
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--help", NULL);
    assert_int_equal(it_run_capture(&err, &out, e, "help", &a), 0);
    it_assert_contains(out, "handler attempts per event and handler: a RETRY on attempt N "
                            "dead-letters the event");
    free(err);
    free(out);
    it_argv_free(&a);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(unreachable_server_is_said_at_once, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(missing_stream_names_create, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(configuration_errors_exit_2_naming_the_fix, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(insecure_files_name_the_flags, it_setup_no_server, it_teardown),
    cmocka_unit_test_setup_teardown(markers_refuse_unknown_identities, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(check_lists_handlers_without_nats, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(man_page_retention_examples_work, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(created_stream_has_max_bytes, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(publish_key_and_fixed_id, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(max_deliver_help_counts_attempts, it_setup_no_server,
                                    it_teardown),
};

IB_TEST_MAIN(tests)
