/* SPDX-License-Identifier: Apache-2.0 */
/* The ledger example as a transactional handler sees the world: loaded by
 * the loader, given the host's real API table and a hand-made proxy whose
 * connection is an in-memory database inside a savepoint the test opened
 * (as the recorder's transaction would be), and whose stage callback
 * captures what would go to the outbox. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"

#include "event.h"
#include "fixture.h"
#include "jetstream.h"
#include "loader.h"
#include "uuid.h"

#define EXAMPLES IB_EXAMPLE_PLUGINS_DIR
#define ENTRY_ID "3b2a19087f6e4d5cab9e8d7c6b5a4938"

typedef struct outbox {
    int calls;
    ib_status answer;
    char subject[128];
    char msg_id[IB_ID_BUF_SIZE];
    uint8_t data[512];
    size_t len;
} outbox;

typedef struct world {
    ib_plugin *p;
    const ib_handler_desc *h;
    sqlite3 *db;
    outbox out;
    ib_bus_proxy bus;
} world;

static ib_status stage(void *ctx, const char *subject, const char *msg_id, const uint8_t *data,
                       size_t len, ib_error *err)
{
    outbox *o = ctx;
    o->calls++;
    if (o->answer != IB_OK)
        return ib_error_set(err, o->answer, "outbox: refused");
    snprintf(o->subject, sizeof(o->subject), "%s", subject);
    snprintf(o->msg_id, sizeof(o->msg_id), "%s", msg_id);
    assert_true(len <= sizeof(o->data));
    memcpy(o->data, data, len);
    o->len = len;
    return IB_OK;
}

static void sql(sqlite3 *db, const char *text)
{
    char *msg = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", text, msg);
}

static int setup(void **state)
{
    world *w = calloc(1, sizeof(*w));
    char *path = fx_stage(EXAMPLES, "ledger.so", NULL, 0755);
    ib_error err;

    assert_non_null(w);
    *state = w;
    assert_int_equal(ib_plugin_open(&w->p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(w->p, ib_bus_host_api(), NULL, &err), IB_OK);
    w->h = ib_plugin_handler(w->p, 0);
    assert_string_equal(w->h->name, "apply");
    assert_int_equal(ib_plugin_handler_flags(w->p, 0), IB_HANDLER_TRANSACTIONAL);
    assert_int_equal(sqlite3_open(":memory:", &w->db), SQLITE_OK);
    sql(w->db, "BEGIN IMMEDIATE; SAVEPOINT host_work");
    w->out.answer = IB_OK;
    w->bus = (ib_bus_proxy){.subject_prefix = "events",
                            .source = "ledger-test",
                            .stage = stage,
                            .stage_ctx = &w->out,
                            .db = w->db};
    free(path);
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    if (w != NULL) {
        sqlite3_close(w->db);
        ib_plugin_close(w->p);
        free(w);
    }
    fx_cleanup();
    return 0;
}

/* Calls the handler with `payload` as event ENTRY_ID. */
static ib_verdict apply(world *w, const char *payload)
{
    ib_raw_event ev = {
        .size = sizeof(ev),
        .id = ENTRY_ID,
        .type = "ledger.entry",
        .payload = (const uint8_t *)payload,
        .payload_len = strlen(payload),
        .source = "",
        .subject = "events.ledger.entry",
        .delivery_count = 1,
        .consumer = "orders/ledger/apply",
    };
    return w->h->handle(ib_plugin_state(w->p), ev.payload, ev.payload_len, &w->bus, &ev);
}

/* The balance of `account`, or `none` when it has no row (or no table). */
static int64_t balance(world *w, const char *account, int64_t none)
{
    sqlite3_stmt *st = NULL;
    int64_t v = none;
    if (sqlite3_prepare_v2(w->db, "SELECT balance FROM ledger_balances WHERE account = ?1", -1, &st,
                           NULL) != SQLITE_OK)
        return none;
    sqlite3_bind_text(st, 1, account, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The last staged event: ledger.posted under the derived id, with `text`. */
static void expect_posted(world *w, const char *text)
{
    char derived[IB_ID_BUF_SIZE];
    ib_event *ev = NULL;
    ib_event_limits lim = {.id_flags = IB_ID_ANY_VERSION};

    ib_uuid_derive(derived, ENTRY_ID, "ledger.posted");
    assert_string_equal(w->out.subject, "events.ledger.posted");
    assert_string_equal(w->out.msg_id, derived);
    assert_int_equal(ib_event_decode(&ev, NULL, w->out.data, w->out.len, &lim, NULL), IB_OK);
    assert_string_equal(ev->id, derived);
    assert_string_equal(ev->type, "ledger.posted");
    assert_string_equal(ev->source, "ledger-test");
    assert_int_equal(ev->payload_len, strlen(text));
    assert_memory_equal(ev->payload, text, strlen(text));
    ib_event_free(ev);
}

static void entries_change_balances_and_stage_posted(void **state)
{
    world *w = *state;

    assert_int_equal(apply(w, "acct-1 5"), IB_HANDLER_OK);
    assert_int_equal(balance(w, "acct-1", -1), 5);
    assert_int_equal(w->out.calls, 1);
    expect_posted(w, "acct-1 5 5");

    assert_int_equal(apply(w, "acct-1 -7"), IB_HANDLER_OK);
    assert_int_equal(balance(w, "acct-1", -1), -2);
    expect_posted(w, "acct-1 -7 -2");

    assert_int_equal(apply(w, "B.z_9 +40"), IB_HANDLER_OK);
    assert_int_equal(balance(w, "B.z_9", -1), 40);
    assert_int_equal(balance(w, "acct-1", -1), -2);
    expect_posted(w, "B.z_9 40 40");
    assert_int_equal(w->out.calls, 3);

    /* the writes are the savepoint's: the host's rollback takes them all */
    sql(w->db, "ROLLBACK TO host_work");
    assert_int_equal(balance(w, "acct-1", -1), -1);
}

static void the_int64_range_is_kept_exactly(void **state)
{
    world *w = *state;

    assert_int_equal(apply(w, "max 9223372036854775807"), IB_HANDLER_OK);
    assert_int_equal(balance(w, "max", 0), INT64_MAX);
    assert_int_equal(apply(w, "min -9223372036854775808"), IB_HANDLER_OK);
    assert_int_equal(balance(w, "min", 0), INT64_MIN);
    expect_posted(w, "min -9223372036854775808 -9223372036854775808");
    /* a sum beyond int64 can never apply */
    assert_int_equal(apply(w, "max 1"), IB_HANDLER_REJECT);
    assert_int_equal(apply(w, "min -1"), IB_HANDLER_REJECT);
    assert_int_equal(balance(w, "max", 0), INT64_MAX);
    assert_int_equal(w->out.calls, 2);
}

static void malformed_payloads_are_rejected(void **state)
{
    world *w = *state;
    static const char *const bad[] = {
        "",
        "acct",
        "acct ",
        "acct 5 ",
        "acct  5",
        " acct 5",
        "ac ct 5",
        "acct x",
        "acct 5x",
        "acct -",
        "acct +",
        "acct --5",
        "acct 0x10",
        "ac/ct 5",
        "acct\t5",
        "acct 9223372036854775808",
        "acct -9223372036854775809",
        "acct 000000000000000000001",
        "a123456789a123456789a123456789a123456789a123456789a123456789abcde 1",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (apply(w, bad[i]) != IB_HANDLER_REJECT)
            fail_msg("payload \"%s\" was not rejected", bad[i]);
    assert_int_equal(w->out.calls, 0);
    assert_int_equal(balance(w, "acct", -1), -1);
    /* the longest account passes */
    assert_int_equal(apply(w, "a123456789a123456789a123456789a123456789a123456789a123456789abcd 1"),
                     IB_HANDLER_OK);
}

static void no_transaction_means_retry(void **state)
{
    world *w = *state;

    w->bus.db = NULL;
    assert_int_equal(apply(w, "acct 5"), IB_HANDLER_RETRY);
    assert_int_equal(w->out.calls, 0);
}

static void a_failed_stage_means_retry(void **state)
{
    world *w = *state;

    w->out.answer = IB_ERR_RECORDER;
    assert_int_equal(apply(w, "acct 5"), IB_HANDLER_RETRY);
    assert_int_equal(w->out.calls, 1);
}

static void an_sqlite_error_means_retry(void **state)
{
    world *w = *state;

    /* a table of that name the ledger cannot use */
    sql(w->db, "CREATE TABLE ledger_balances(other TEXT)");
    assert_int_equal(apply(w, "acct 5"), IB_HANDLER_RETRY);
    assert_int_equal(w->out.calls, 0);
}

static void init_refuses_a_host_without_transaction_db(void **state)
{
    char *path = fx_stage(EXAMPLES, "ledger.so", NULL, 0755);
    char *expected = fx_fmt("plugin %s: init failed: the host offers no transaction_db (ABI "
                            "1.2), log, publish or derive_id",
                            path);
    ib_host_api old = fx_host;
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    old.size = (uint32_t)offsetof(ib_host_api, transaction_db);
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &old, NULL, &err), IB_ERR_PLUGIN);
    assert_string_equal(err.msg, expected);
    ib_plugin_close(p);
    /* the slot present but empty is no better */
    assert_null(fx_host.transaction_db);
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, NULL, &err), IB_ERR_PLUGIN);
    ib_plugin_close(p);
    free(expected);
    free(path);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(entries_change_balances_and_stage_posted, setup, teardown),
    cmocka_unit_test_setup_teardown(the_int64_range_is_kept_exactly, setup, teardown),
    cmocka_unit_test_setup_teardown(malformed_payloads_are_rejected, setup, teardown),
    cmocka_unit_test_setup_teardown(no_transaction_means_retry, setup, teardown),
    cmocka_unit_test_setup_teardown(a_failed_stage_means_retry, setup, teardown),
    cmocka_unit_test_setup_teardown(an_sqlite_error_means_retry, setup, teardown),
    cmocka_unit_test_teardown(init_refuses_a_host_without_transaction_db, teardown),
};

IB_TEST_MAIN(tests)
