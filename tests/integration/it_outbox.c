/* SPDX-License-Identifier: Apache-2.0 */
/* The transactional outbox after a crash (issue 12): events a
 * transactional handler publishes are staged in the marker file in the
 * transaction of its marker, and sent after the commit with Nats-Msg-Id =
 * the new event's id. Whatever a killed host left in the outbox, the next
 * host sends at start-up, and a message that was sent but whose row
 * survived is sent again only for JetStream to drop it as a duplicate:
 * each event reaches its stream once.
 *
 * The ledger example plugin is the transactional handler; its events go
 * to posted.ledger.posted (--publish-prefix posted), outside the stream
 * the host consumes. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "ib_test.h"
#include "it_support.h"
#include "uuid.h"

#define DURABLE "outbox"
#define CONSUMER DURABLE "/ledger/apply"
#define ENTRY_TYPE "ledger.entry"
#define POSTED_TYPE "ledger.posted"
#define POSTED_STREAM "POSTED"
#define POSTED_SUBJECT "posted." POSTED_TYPE
/* Long enough that every resend within a test falls inside it. */
#define POSTED_DUPLICATES_MS (10 * 60 * 1000)

#define Q_MARKERS "SELECT count(*) FROM processed_log WHERE consumer = '" CONSUMER "'"
#define Q_OUTBOX "SELECT count(*) FROM processed_outbox"

static void start_host(it_proc *host, it_env *e)
{
    it_argv a;
    it_argv_run(&a, e, DURABLE);
    it_argv_plugin(&a, "ledger", NULL);
    it_argv_addl(&a, "--publish-prefix", "posted", NULL);
    assert_true(it_spawn(host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, DURABLE, it_timeout(30000)));
}

/* n entries "acct-<i % 3> <i + 1>": ids in *ids, the posted ids expected
 * for them in *posted, and the payload each posted event starts with
 * ("ACCOUNT AMOUNT ") in *prefixes; all freed with it_lines_free. */
static void publish_entries(it_env *e, size_t n, char ***ids, char ***posted, char ***prefixes)
{
    char path[PATH_MAX], **payloads = calloc(n, sizeof(char *));
    it_published out;
    *posted = calloc(n, sizeof(char *));
    *prefixes = calloc(n, sizeof(char *));
    assert_true(payloads != NULL && *posted != NULL && *prefixes != NULL);
    assert_true(it_make_ids(ids, n, it_path(path, e, "ids.txt")));
    for (size_t i = 0; i < n; i++) {
        char derived[IB_ID_BUF_SIZE], text[64];
        ib_uuid_derive(derived, (*ids)[i], POSTED_TYPE);
        snprintf(text, sizeof(text), "acct-%zu %zu", i % 3, i + 1);
        payloads[i] = strdup(text);
        snprintf(text, sizeof(text), "acct-%zu %zu ", i % 3, i + 1);
        (*prefixes)[i] = strdup(text);
        (*posted)[i] = strdup(derived);
        assert_true(payloads[i] != NULL && (*prefixes)[i] != NULL && (*posted)[i] != NULL);
    }
    assert_true(
        it_write_jsonl_each(it_path(path, e, "entries.jsonl"), *ids, payloads, n, ENTRY_TYPE));
    assert_int_equal(it_publish(&out, e, path, NULL), 0);
    assert_int_equal(out.published, (long)n);
    it_lines_free(payloads, n);
}

/* The balances the entries of publish_entries add up to, per account. */
static void check_balances(const char *db, size_t n)
{
    for (size_t acct = 0; acct < 3; acct++) {
        char sql[128];
        int64_t want = 0, have = 0;
        for (size_t i = acct; i < n; i += 3)
            want += (int64_t)(i + 1);
        snprintf(sql, sizeof(sql), "SELECT balance FROM ledger_balances WHERE account = 'acct-%zu'",
                 acct);
        assert_true(it_db_int(&have, db, sql));
        assert_int_equal(have, want);
    }
}

/* (a) The stream of the posted events does not exist yet: every send
 * fails (no responders), so the host commits markers and balances while
 * the events stay in the outbox; it is killed like that. Once the stream
 * exists, the next host sends each of them once and empties the outbox. */
static void outbox_replayed_after_kill(void **state)
{
    it_env *e = *state;
    const size_t n = (size_t)it_scaled(60, 20);
    char db[PATH_MAX], **ids = NULL, **posted = NULL, **prefixes = NULL;
    it_proc host;
    it_posted tally;
    it_path(db, e, "markers.db");

    start_host(&host, e);
    publish_entries(e, n, &ids, &posted, &prefixes);
    assert_int_equal(it_db_wait_int(db, Q_MARKERS, (int64_t)n, it_timeout(60000)), (int64_t)n);
    assert_true(it_wait_consumer_idle(NULL, &e->server, IT_STREAM, DURABLE, it_timeout(30000)));
    assert_int_equal(it_proc_stop(&host, SIGKILL, 0), -SIGKILL);
    check_balances(db, n);
    assert_int_equal(it_db_wait_int(db, Q_OUTBOX, (int64_t)n, 0), (int64_t)n);

    assert_true(it_stream_add(&e->server, POSTED_STREAM, "posted.>", POSTED_DUPLICATES_MS));
    start_host(&host, e);
    assert_int_equal(it_wait_stream_count(&e->server, POSTED_STREAM, n, it_timeout(60000)), n);
    assert_int_equal(it_db_wait_int(db, Q_OUTBOX, 0, it_timeout(30000)), 0);
    it_finish_hosts(e, DURABLE, &host, 1, it_timeout(60000));

    assert_true(it_posted_tally(&tally, &e->server, POSTED_STREAM, posted, prefixes, n));
    assert_int_equal(tally.messages, n);
    assert_int_equal(tally.missing, 0);
    assert_int_equal(tally.duplicated, 0);
    assert_int_equal(tally.unexpected, 0);
    assert_int_equal(tally.bad, 0);
    check_balances(db, n); /* the replay applied nothing again */
    it_lines_free(ids, n);
    it_lines_free(posted, n);
    it_lines_free(prefixes, n);
    it_done(e);
}

/* Stages one ledger.posted event for `id` by hand, as the host would have:
 * the encoded event into *data (malloc'd), its outbox row into the file. */
static void stage_by_hand(uint8_t **data, size_t *len, const char *db, const char *id)
{
    ib_error err;
    static const char payload[] = "acct-9 5 5";
    ib_event_fields f = {
        .id = id, .type = POSTED_TYPE, .payload = payload, .payload_len = strlen(payload)};
    assert_int_equal(ib_event_encode(data, len, &f, &err), IB_OK);
    char *blob = it_db_blob_literal(*data, *len);
    assert_non_null(blob);
    size_t cap = strlen(blob) + 256;
    char *sql = malloc(cap);
    assert_non_null(sql);
    snprintf(sql, cap,
             "INSERT INTO processed_outbox(subject, msg_id, data, staged_ms) "
             "VALUES('%s', '%s', %s, %" PRId64 ")",
             POSTED_SUBJECT, id, blob, it_now_ms());
    assert_true(it_db_exec(db, sql));
    free(sql);
    free(blob);
}

/* (b) A host that crashed between the send and the delete leaves a row for
 * a message the stream already holds. The next host sends it again (the
 * stream drops it by its Nats-Msg-Id) and deletes the row; a row that was
 * never sent goes out once beside it. */
static void outbox_sent_before_crash(void **state)
{
    it_env *e = *state;
    char db[PATH_MAX], sent_id[IB_ID_BUF_SIZE], unsent_id[IB_ID_BUF_SIZE];
    char *expected[2] = {sent_id, unsent_id};
    uint8_t *data = NULL;
    size_t len = 0;
    bool dup = true;
    it_proc host;
    it_posted tally;
    it_path(db, e, "markers.db");
    ib_uuid_derive(sent_id, "sent", POSTED_TYPE);
    ib_uuid_derive(unsent_id, "unsent", POSTED_TYPE);

    /* a first host makes the file (with its outbox table) and stops */
    assert_true(it_stream_add(&e->server, POSTED_STREAM, "posted.>", POSTED_DUPLICATES_MS));
    start_host(&host, e);
    assert_int_equal(it_proc_stop(&host, SIGTERM, it_timeout(30000)), 0);

    stage_by_hand(&data, &len, db, sent_id);
    assert_true(it_js_publish_id(&dup, &e->server, POSTED_SUBJECT, sent_id, data, len));
    assert_false(dup);
    free(data);
    stage_by_hand(&data, &len, db, unsent_id);
    free(data);
    assert_int_equal(it_db_wait_int(db, Q_OUTBOX, 2, 0), 2);

    start_host(&host, e);
    assert_int_equal(it_db_wait_int(db, Q_OUTBOX, 0, it_timeout(30000)), 0);
    assert_int_equal(it_wait_stream_count(&e->server, POSTED_STREAM, 2, it_timeout(30000)), 2);
    it_finish_hosts(e, DURABLE, &host, 1, it_timeout(60000));
    assert_true(it_posted_tally(&tally, &e->server, POSTED_STREAM, expected, NULL, 2));
    assert_int_equal(tally.messages, 2);
    assert_int_equal(tally.missing + tally.duplicated + tally.unexpected + tally.bad, 0);
    it_done(e);
}

/* One test per line: CMake registers them by reading these lines. */
// clang-format off
static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(outbox_replayed_after_kill, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(outbox_sent_before_crash, it_setup, it_teardown),
};
// clang-format on

IB_TEST_MAIN(tests)
