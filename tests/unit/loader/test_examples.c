/* SPDX-License-Identifier: Apache-2.0 */
/* The example plugins, loaded by the loader and driven through dispatch:
 * what each promises in its header comment. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib_test.h"

#include "dispatch.h"
#include "event.h"
#include "fixture.h"
#include "host.h"
#include "loader.h"
#include "recorder.h"
#include "uuid.h"

#define EXAMPLES IB_EXAMPLE_PLUGINS_DIR

typedef struct world {
    ib_recorder *rec;
    ib_dispatch *d;
    ib_plugin *p;
} world;

static int teardown(void **state)
{
    world *w = *state;
    if (w != NULL) {
        ib_dispatch_free(w->d);
        ib_plugin_close(w->p);
        ib_recorder_close(w->rec);
        free(w);
    }
    fx_cleanup();
    fx_publish_result = 0;
    fx_publish_calls = 0;
    fx_log[0] = '\0';
    return 0;
}

/* Loads example `name` with `config` and registers it under "orders". */
static world *load(void **state, const char *name, const char *config)
{
    world *w = calloc(1, sizeof(*w));
    char *file = fx_fmt("%s.so", name);
    char *path = fx_stage(EXAMPLES, file, NULL, 0755);
    ib_error err;

    assert_non_null(w);
    *state = w;
    ib_error_clear(&err);
    assert_int_equal(ib_plugin_open(&w->p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(w->p, &fx_host, config, &err), IB_OK);
    assert_int_equal(ib_recorder_open(&w->rec, "memory:", NULL, &err), IB_OK);
    assert_int_equal(ib_dispatch_create(&w->d, w->rec, NULL, &err), IB_OK);
    assert_int_equal(ib_host_plugin_register(w->p, w->d, "orders", NULL, &err), IB_OK);
    free(path);
    free(file);
    return w;
}

/* Opens example `name` and expects init to fail with `reason`. */
static void expect_init_failure(const char *name, const char *config, const char *reason)
{
    char *file = fx_fmt("%s.so", name);
    char *path = fx_stage(EXAMPLES, file, NULL, 0755);
    char *expected = fx_fmt("plugin %s: init failed: %s", path, reason);
    ib_plugin *p = NULL;
    ib_error err;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, config, &err), IB_ERR_PLUGIN);
    assert_string_equal(err.msg, expected);
    ib_plugin_close(p);
    free(expected);
    free(path);
    free(file);
}

static void audit_appends_one_line_per_event(void **state)
{
    char *log = fx_fmt("%s/audit.log", fx_dir());
    char *config = fx_fmt("file=%s", log);
    world *w = load(state, "audit", config);
    const char *types[] = {"order.created", "order.paid", "payment.settled"};
    char expected[512] = "";
    ib_delivery dl;
    char *got;

    assert_string_equal(ib_plugin_description(w->p),
                        "appends consumer, id and type of each event to a file");
    for (size_t i = 0; i < 3; i++) {
        ib_event *ev = NULL;
        fx_run_event(w->d, &dl, &ev, types[i], "{}", 1);
        assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
        snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected),
                 "orders/audit/audit %s %s\n", ev->id, types[i]);
        /* A redelivery is a duplicate: no second line. */
        fx_rerun_event(w->d, &dl, ev, 2);
        assert_int_equal(dl.counts.duplicates, 1);
        ib_event_free(ev);
    }
    got = fx_read(log);
    assert_string_equal(got, expected);
    free(got);
    free(config);
    free(log);
}

static void audit_retries_when_the_write_fails(void **state)
{
    /* Every write to /dev/full fails with ENOSPC. */
    world *w = load(state, "audit", "file=/dev/full");
    ib_delivery dl;
    ib_event *ev = NULL;

    fx_run_event(w->d, &dl, &ev, "order.created", "{}", 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl.counts.retried, 1);
    ib_event_free(ev);
}

/* Inits example `name` with `config` under `api` and closes it; returns
 * init's status, with its message in `msg` (cap bytes). */
static ib_status init_with(const char *name, const char *config, const ib_host_api *api, char *msg,
                           size_t cap)
{
    char *file = fx_fmt("%s.so", name);
    char *path = fx_stage(EXAMPLES, file, NULL, 0755);
    ib_plugin *p = NULL;
    ib_error err;
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    ib_status st = ib_plugin_init(p, api, config, &err);
    snprintf(msg, cap, "%s", st == IB_OK ? "" : err.msg);
    ib_plugin_close(p);
    free(path);
    free(file);
    return st;
}

/* Issue 33: under ibus run --check (IB_HOST_CHECKING, ABI 1.4) the audit
 * and flaky examples create no file: an existing one is only proven
 * writable, a missing one needs a directory it could be made in, and
 * both are said. A host before 1.4 (a shorter table) never checks. */
static void check_creates_no_file(void **state)
{
    (void)state;
    ib_host_api checking = fx_host, old = fx_host;
    checking.flags = IB_HOST_CHECKING;
    old.size = offsetof(ib_host_api, flags);
    old.flags = IB_HOST_CHECKING; /* beyond its size: never read */
    assert_true(ib_host_api_checking(&checking));
    assert_false(ib_host_api_checking(&fx_host));
    assert_false(ib_host_api_checking(&old));
    static const char *const names[] = {"audit", "flaky"};
    char msg[512];
    for (size_t i = 0; i < 2; i++) {
        char *log = fx_fmt("%s/%s.log", fx_dir(), names[i]);
        char *config = fx_fmt("file=%s", log);
        assert_int_equal(init_with(names[i], config, &checking, msg, sizeof(msg)), IB_OK);
        assert_int_equal(access(log, F_OK), -1);
        char *nodir = fx_fmt("file=%s/nodir/x.log", fx_dir());
        assert_int_equal(init_with(names[i], nodir, &checking, msg, sizeof(msg)), IB_ERR_PLUGIN);
        assert_non_null(strstr(msg, "/nodir/x.log: directory "));
        assert_non_null(strstr(msg, "/nodir: No such file or directory"));
        /* an existing file is opened, not changed */
        free(fx_write(strrchr(log, '/') + 1, "kept\n"));
        assert_int_equal(init_with(names[i], config, &checking, msg, sizeof(msg)), IB_OK);
        char *kept = fx_read(log);
        assert_string_equal(kept, "kept\n");
        free(kept);
        assert_int_equal(unlink(log), 0);
        /* a real run, and a host before 1.4, create it */
        assert_int_equal(init_with(names[i], config, &old, msg, sizeof(msg)), IB_OK);
        assert_int_equal(access(log, F_OK), 0);
        free(nodir);
        free(config);
        free(log);
    }
}

/* Issue 43: a symbolic link planted at file= is refused, not followed,
 * by a run and by --check alike: the file it names is left as it was, and
 * a dangling one creates nothing. */
static void file_refuses_a_symbolic_link(void **state)
{
    (void)state;
    ib_host_api checking = fx_host;
    checking.flags = IB_HOST_CHECKING;
    static const char *const names[] = {"audit", "flaky"};
    char msg[512];
    char *target = fx_write("target", "kept\n");
    char *link = fx_fmt("%s/planted.log", fx_dir());
    char *config = fx_fmt("file=%s", link);
    char *refusal = fx_fmt("cannot open %s: refusing to follow a symbolic link", link);
    char *nowhere = fx_fmt("%s/nowhere", fx_dir());
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(symlink(target, link), 0);
        assert_int_equal(init_with(names[i], config, &fx_host, msg, sizeof(msg)), IB_ERR_PLUGIN);
        assert_non_null(strstr(msg, refusal));
        assert_int_equal(init_with(names[i], config, &checking, msg, sizeof(msg)), IB_ERR_PLUGIN);
        assert_non_null(strstr(msg, refusal));
        char *kept = fx_read(target);
        assert_string_equal(kept, "kept\n");
        free(kept);
        assert_int_equal(unlink(link), 0);
        assert_int_equal(symlink(nowhere, link), 0);
        assert_int_equal(init_with(names[i], config, &fx_host, msg, sizeof(msg)), IB_ERR_PLUGIN);
        assert_non_null(strstr(msg, refusal));
        assert_int_equal(access(nowhere, F_OK), -1);
        assert_int_equal(unlink(link), 0);
    }
    free(nowhere);
    free(refusal);
    free(config);
    free(link);
    free(target);
}

static void audit_needs_a_file(void **state)
{
    (void)state;
    expect_init_failure("audit", "", "config needs file=PATH (got \"\")");
    expect_init_failure("audit", "path=x", "config needs file=PATH (got \"path=x\")");
}

/* Returns how many of `n` fresh events flaky (with `config`) fails on
 * their first delivery; each event that fails must pass on its second. */
static int flaky_failures(void **state, const char *config, int n, char ids[][IB_ID_BUF_SIZE])
{
    world *w = load(state, "flaky", config);
    int failed = 0;

    for (int i = 0; i < n; i++) {
        ib_delivery dl;
        ib_event *ev = NULL;
        fx_run_event(w->d, &dl, &ev, "order.created", "{}", 1);
        strcpy(ids[i], ev->id);
        if (dl.outcome == IB_OUTCOME_NAK) {
            failed++;
            fx_rerun_event(w->d, &dl, ev, 2);
            assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
        } else {
            assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
        }
        ib_event_free(ev);
    }
    return failed;
}

static void flaky_fails_the_configured_fraction(void **state)
{
    char ids[200][IB_ID_BUF_SIZE];

    assert_int_equal(flaky_failures(state, "fraction=0", 50, ids), 0);
    teardown(state);
    *state = NULL;
    assert_int_equal(flaky_failures(state, "fraction=1", 50, ids), 50);
    teardown(state);
    *state = NULL;
    /* Random ids: outside 20..180 of 200 has a probability below 1e-20. */
    int half = flaky_failures(state, "fraction=0.5", 200, ids);
    assert_in_range(half, 20, 180);
}

/* The choice depends on the id alone, so every process agrees: the same
 * ids through a second, independently initialised instance fail alike. */
static void flaky_agrees_across_instances(void **state)
{
    enum { N = 64 };
    char ids[N][IB_ID_BUF_SIZE];
    bool first[N];
    world *w;

    flaky_failures(state, "fraction=0.5", N, ids);
    w = *state;
    for (int round = 0; round < 2; round++) {
        ib_recorder *rec = NULL;
        ib_dispatch *d = NULL;
        ib_error err;

        /* Fresh markers, same plugin state: only the id decides. */
        assert_int_equal(ib_recorder_open(&rec, "memory:", NULL, &err), IB_OK);
        assert_int_equal(ib_dispatch_create(&d, rec, NULL, &err), IB_OK);
        assert_int_equal(ib_host_plugin_register(w->p, d, round == 0 ? "a" : "b", NULL, &err),
                         IB_OK);
        for (int i = 0; i < N; i++) {
            ib_event_fields f = {
                .id = ids[i], .type = "order.paid", .payload = "", .payload_len = 0};
            uint8_t *buf = NULL;
            size_t len = 0;
            ib_event *ev = NULL;
            ib_delivery dl;

            assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_OK);
            assert_int_equal(ib_event_decode(&ev, NULL, buf, len, NULL, &err), IB_OK);
            free(buf);
            fx_rerun_event(d, &dl, ev, 1);
            if (round == 0)
                first[i] = dl.outcome == IB_OUTCOME_NAK;
            else
                assert_int_equal(dl.outcome == IB_OUTCOME_NAK, first[i]);
            ib_event_free(ev);
        }
        ib_dispatch_free(d);
        ib_recorder_close(rec);
    }
}

static void flaky_checks_its_config(void **state)
{
    (void)state;
    expect_init_failure("flaky", "fraction=2", "fraction=2: expected a number from 0 to 1");
    expect_init_failure("flaky", "fraction=half", "fraction=half: expected a number from 0 to 1");
}

static void relay_republishes_under_a_derived_id(void **state)
{
    world *w = load(state, "relay", "");
    char derived[IB_ID_BUF_SIZE], *header;
    ib_delivery dl;
    ib_event *ev = NULL;

    fx_run_event(w->d, &dl, &ev, "order.created", "{\"order\":42}", 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(fx_publish_calls, 1);
    ib_uuid_derive(derived, ev->id, "order.relayed");
    assert_string_equal(fx_published_id, derived);
    assert_string_equal(fx_published_type, "order.relayed");
    assert_string_equal(fx_published_payload, "{\"order\":42}");
    header = fx_fmt("relayed-from=%s", ev->id);
    assert_string_equal(fx_published_header, header);
    free(header);
    ib_event_free(ev);
}

static void relay_retries_a_failed_publish(void **state)
{
    world *w = load(state, "relay", "to=order.mirrored");
    char derived[IB_ID_BUF_SIZE];
    ib_delivery dl;
    ib_event *ev = NULL;

    fx_publish_result = -1;
    fx_run_event(w->d, &dl, &ev, "order.created", "x", 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_non_null(strstr(fx_log, "failed; will retry"));
    /* The retry derives the same id: JetStream drops a copy that did land. */
    fx_publish_result = 0;
    fx_rerun_event(w->d, &dl, ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(fx_publish_calls, 2);
    ib_uuid_derive(derived, ev->id, "order.mirrored");
    assert_string_equal(fx_published_id, derived);
    assert_string_equal(fx_published_type, "order.mirrored");
    ib_event_free(ev);
}

static void relay_checks_its_config(void **state)
{
    (void)state;
    expect_init_failure("relay", "to=order.created",
                        "to=TYPE needs 1-255 bytes without spaces, other than order.created");
    expect_init_failure(
        "relay", "to=", "to=TYPE needs 1-255 bytes without spaces, other than order.created");
}

/* Issue 45: the example with config and state. Each request line carries
 * the event id as its idempotency key; a redelivery is a duplicate and
 * sends nothing; a payload that is no amount is rejected; fini logs the
 * count from the state it then frees (valgrind sees the free). */
static void charge_sends_the_event_id_as_the_key(void **state)
{
    char *log = fx_fmt("%s/charges.log", fx_dir());
    char *config = fx_fmt("endpoint=https://pay.example/v1/charges,file=%s,currency=USD", log);
    world *w = load(state, "charge", config);
    ib_delivery dl;
    ib_event *ev = NULL, *bad = NULL;

    fx_run_event(w->d, &dl, &ev, "order.created", "1250", 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    char *expected =
        fx_fmt("POST https://pay.example/v1/charges idempotency-key=%s amount=1250 currency=USD\n",
               ev->id);
    fx_rerun_event(w->d, &dl, ev, 2);
    assert_int_equal(dl.counts.duplicates, 1);
    fx_run_event(w->d, &dl, &bad, "order.created", "12.50", 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_int_equal(dl.dead_letter_reason, IB_DLQ_REJECTED);
    assert_non_null(strstr(fx_log, "payload is no amount in cents"));
    char *got = fx_read(log);
    assert_string_equal(got, expected);

    ib_dispatch_free(w->d);
    w->d = NULL;
    ib_plugin_close(w->p);
    w->p = NULL;
    assert_non_null(
        strstr(fx_log, "fini: 1 charge request(s) sent to https://pay.example/v1/charges"));
    free(got);
    free(expected);
    ib_event_free(bad);
    ib_event_free(ev);
    free(config);
    free(log);
}

/* Each bad config fails init with a message that names what is wrong;
 * nothing is left allocated (init frees what it took). */
static void charge_checks_its_config(void **state)
{
    (void)state;
    static const struct {
        const char *config, *reason;
    } cases[] = {
        {"", "config needs endpoint= (got \"\")"},
        {"file=x.log", "config needs endpoint= (got \"file=x.log\")"},
        {"endpoint=https://p.example/c",
         "config needs file= (got \"endpoint=https://p.example/c\")"},
        {"endpoint=,file=x.log", "config needs endpoint= (got \"endpoint=,file=x.log\")"},
        {"endpoint=ftp://p.example/c,file=x.log",
         "endpoint=ftp://p.example/c: not an http:// or https:// URL"},
        {"endpoint=https:///c,file=x.log", "endpoint=https:///c: no host"},
        {"endpoint=https://u:pw@p.example/c,file=x.log",
         "endpoint=: user and password do not belong in the URL (it is logged)"},
        {"endpoint=http://a,endpoint=http://b,file=x.log", "config gives endpoint= more than once"},
        {"endpoint=http://a,file=x.log,currency=eur",
         "currency=eur: not three capital letters (ISO 4217, e.g. EUR)"},
        {"endpoint=http://a,file=x.log,currency=EURO",
         "currency=EURO: not three capital letters (ISO 4217, e.g. EUR)"},
        {"endpoint=http://a,file=x.log,timeout=5",
         "config item \"timeout=5\": unknown key (keys: endpoint=URL, file=PATH, currency=CODE)"},
        {"endpoint=http://a,verbose",
         "config item \"verbose\": not key=value (keys: endpoint=URL, file=PATH, currency=CODE)"},
        {"endpoint=http://a,file=/nonexistent-dir/x.log",
         "file=/nonexistent-dir/x.log: No such file or directory"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_init_failure("charge", cases[i].config, cases[i].reason);
}

/* Under --check the request log is not created, and fini still runs. */
static void charge_under_check_creates_nothing(void **state)
{
    (void)state;
    ib_host_api checking = fx_host;
    checking.flags = IB_HOST_CHECKING;
    char *log = fx_fmt("%s/charges.log", fx_dir());
    char *config = fx_fmt("endpoint=http://127.0.0.1:1/charge,file=%s", log);
    char msg[512];
    fx_log[0] = '\0';
    assert_int_equal(init_with("charge", config, &checking, msg, sizeof(msg)), IB_OK);
    assert_int_equal(access(log, F_OK), -1);
    assert_non_null(strstr(fx_log, "fini: 0 charge request(s) sent to http://127.0.0.1:1/charge"));
    free(config);
    free(log);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(audit_appends_one_line_per_event, teardown),
    cmocka_unit_test_teardown(audit_retries_when_the_write_fails, teardown),
    cmocka_unit_test_teardown(file_refuses_a_symbolic_link, teardown),
    cmocka_unit_test_teardown(audit_needs_a_file, teardown),
    cmocka_unit_test_teardown(check_creates_no_file, teardown),
    cmocka_unit_test_teardown(flaky_fails_the_configured_fraction, teardown),
    cmocka_unit_test_teardown(flaky_agrees_across_instances, teardown),
    cmocka_unit_test_teardown(flaky_checks_its_config, teardown),
    cmocka_unit_test_teardown(relay_republishes_under_a_derived_id, teardown),
    cmocka_unit_test_teardown(relay_retries_a_failed_publish, teardown),
    cmocka_unit_test_teardown(relay_checks_its_config, teardown),
    cmocka_unit_test_teardown(charge_sends_the_event_id_as_the_key, teardown),
    cmocka_unit_test_teardown(charge_checks_its_config, teardown),
    cmocka_unit_test_teardown(charge_under_check_creates_nothing, teardown),
};

IB_TEST_MAIN(tests)
