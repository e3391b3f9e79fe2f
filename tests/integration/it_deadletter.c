/* SPDX-License-Identifier: Apache-2.0 */
/* Dead letters: REJECT, the poison rule (a handler that crashes the process
 * on every delivery), bytes that are not an Event, a malformed id, and a
 * delivery that looks like a server status. Each dead letter must carry
 * the original bytes, byte for byte, the original's own headers, and
 * headers naming the reason, subject, stream, sequence and delivery count;
 * two durables dead-lettering the same message into one stream both keep
 * theirs (issue 9). */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "event.h"
#include "ib_test.h"
#include "it_support.h"
#include "uuid.h"

#define TYPE_SCRIPTED "test.scripted"

static void start_host(it_proc *host, it_env *e, const char *durable, const char *log,
                       const char *const *extra)
{
    char cfg[PATH_MAX + 8];
    it_argv a;
    it_argv_run(&a, e, durable);
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    it_argv_plugin(&a, "scripted", cfg);
    for (; extra != NULL && *extra != NULL; extra++)
        it_argv_add(&a, *extra);
    assert_true(it_spawn(host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
}

static void dlq_name(char *out, size_t cap, const char *durable)
{
    snprintf(out, cap, "DLQ_%s", durable);
}

/* Checks one dead letter against the original message in the events
 * stream, and returns that original's stream sequence. */
static uint64_t check_dead_letter(it_env *e, const it_msg *dl, const char *durable,
                                  const char *reason, const char *subject,
                                  const char *delivery_count)
{
    char want_subject[128];
    snprintf(want_subject, sizeof(want_subject), "ibus.dlq.%s", durable);
    assert_string_equal(dl->subject, want_subject);
    assert_non_null(it_msg_header(dl, "Ibus-Reason"));
    assert_string_equal(it_msg_header(dl, "Ibus-Reason"), reason);
    assert_non_null(it_msg_header(dl, "Ibus-Error"));
    assert_string_equal(it_msg_header(dl, "Ibus-Subject"), subject);
    assert_string_equal(it_msg_header(dl, "Ibus-Stream"), IT_STREAM);
    assert_string_equal(it_msg_header(dl, "Ibus-Consumer"), durable);
    assert_string_equal(it_msg_header(dl, "Ibus-Delivery-Count"), delivery_count);
    const char *seq_text = it_msg_header(dl, "Ibus-Stream-Seq");
    assert_non_null(seq_text);
    uint64_t seq = strtoull(seq_text, NULL, 10);
    assert_true(seq > 0);

    /* the original bytes, untouched */
    it_msg orig;
    assert_true(it_stream_get(&orig, &e->server, IT_STREAM, seq));
    assert_string_equal(orig.subject, subject);
    assert_int_equal(dl->len, orig.len);
    assert_memory_equal(dl->data, orig.data, orig.len);
    it_msg_clear(&orig);
    return seq;
}

static size_t wait_dead_letters(it_msg **out, it_env *e, const char *durable, size_t n)
{
    char dlq[128];
    dlq_name(dlq, sizeof(dlq), durable);
    assert_int_equal(it_wait_stream_count(&e->server, dlq, n, it_timeout(60000)), n);
    size_t got = it_stream_read_all(out, &e->server, dlq);
    assert_int_equal(got, n);
    return got;
}

static char *first_id(it_env *e, const char *file)
{
    char path[PATH_MAX], **lines = NULL;
    size_t n = it_file_read_lines(&lines, it_path(path, e, file));
    assert_true(n >= 1);
    char *id = strdup(lines[0]);
    it_lines_free(lines, n);
    return id;
}

/* The first JSON log line of `path` whose message is `msg`, parsed by
 * jansson as a log pipeline would (json_decref it). */
static json_t *log_record(const char *path, const char *msg)
{
    char needle[128];
    char **lines = NULL;
    json_t *found = NULL;
    snprintf(needle, sizeof(needle), "\"msg\":\"%s\"", msg);
    size_t n = it_file_read_lines(&lines, path);
    for (size_t i = 0; i < n && found == NULL; i++) {
        if (strstr(lines[i], needle) == NULL)
            continue;
        json_error_t jerr;
        found = json_loads(lines[i], JSON_REJECT_DUPLICATES, &jerr);
        if (found == NULL)
            fail_msg("%s: not JSON (%s): %s", path, jerr.text, lines[i]);
    }
    it_lines_free(lines, n);
    if (found == NULL)
        fail_msg("%s: no record \"%s\"", path, msg);
    return found;
}

/* Numbers in the JSON logs are JSON numbers, durations *_ms integers. */
static void assert_log_numbers(const char *err_path, const char *durable)
{
    json_t *bound = log_record(err_path, "consumer bound");
    assert_string_equal(json_string_value(json_object_get(bound, "durable")), durable);
    assert_true(json_is_integer(json_object_get(bound, "ack_wait_ms")));
    assert_true(json_integer_value(json_object_get(bound, "ack_wait_ms")) > 0);
    assert_true(json_is_integer(json_object_get(bound, "max_deliver")));
    json_decref(bound);

    json_t *dl = log_record(err_path, "dead-lettered");
    assert_string_equal(json_string_value(json_object_get(dl, "reason")), "rejected");
    /* an event is dead-lettered for the durable: durable=, never consumer=,
     * which names a handler's identity in "handler failure" */
    assert_string_equal(json_string_value(json_object_get(dl, "durable")), durable);
    assert_null(json_object_get(dl, "consumer"));
    assert_true(json_is_integer(json_object_get(dl, "delivery_count")));
    assert_int_equal(json_integer_value(json_object_get(dl, "delivery_count")), 1);
    assert_true(json_is_integer(json_object_get(dl, "stream_seq")));
    assert_true(json_integer_value(json_object_get(dl, "stream_seq")) > 0);
    json_decref(dl);

    json_t *stopped = log_record(err_path, "stopped");
    assert_true(json_is_integer(json_object_get(stopped, "dead_lettered")));
    assert_int_equal(json_integer_value(json_object_get(stopped, "dead_lettered")), 1);
    json_decref(stopped);
}

static void reject_dead_lettered(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids[PATH_MAX];
    it_proc host;
    it_msg *dl = NULL;
    it_summary sum;

    start_host(&host, e, "rej", it_path(log, e, "calls.log"), NULL);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--ids-file",
                                it_path(ids, e, "ids.txt"), "reject", NULL),
                     0);
    size_t n = wait_dead_letters(&dl, e, "rej", 1);
    char *id = first_id(e, "ids.txt");
    check_dead_letter(e, &dl[0], "rej", "rejected", "events." TYPE_SCRIPTED, "1");
    assert_string_equal(it_msg_header(&dl[0], "Ibus-Event-Id"), id);
    assert_string_equal(it_msg_header(&dl[0], "Ibus-Event-Type"), TYPE_SCRIPTED);
    it_msgs_free(dl, n);
    it_finish_hosts(e, "rej", &host, 1, it_timeout(60000));

    /* The rejecting handler is not marked (it has no markers at all, so
     * lookup refuses its identity: exit 2); the other handler of the type,
     * which succeeded, is (a replay of the dead letter skips it). */
    assert_int_equal(it_marker_lookup(e, "rej/scripted/scripted", id), 2);
    assert_int_equal(it_marker_lookup(e, "rej/scripted/second", id), 0);
    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    assert_int_equal(sum.rejected, 1);
    assert_int_equal(sum.dead_lettered, 1);
    assert_int_equal(sum.acked, 0);
    assert_log_numbers(host.err_path, "rej");
    free(id);
    it_done(e);
}

/* The handler aborts the process on every delivery. Restart the host after
 * each crash. Each crash counts one handler attempt (in the claim's own
 * transaction, before the handler runs); the restarted process takes the
 * dead process's claim over at once (same host, the PID is gone). After
 * --max-deliver attempts, the next process that receives the event
 * dead-letters it without running the handler. */
static void poison_crash_dead_lettered(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids[PATH_MAX], dlq[64];
    const char *extra[] = {"--max-deliver", "3",     "--ack-wait", "2s",
                           "--retry-delay", "100ms", NULL};
    it_proc host;
    int crashes = 0, starts = 0;
    it_path(log, e, "calls.log");
    dlq_name(dlq, sizeof(dlq), "poison");

    start_host(&host, e, "poison", log, extra);
    starts++;
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--ids-file",
                                it_path(ids, e, "ids.txt"), "crash", NULL),
                     0);
    int64_t deadline = it_now_ms() + it_timeout(120000);
    while (it_stream_count(&e->server, dlq) == 0) {
        assert_true(it_now_ms() < deadline);
        if (!it_proc_running(&host)) {
            /* crashed: abort() in the handler */
            assert_int_equal(host.status, -SIGABRT);
            crashes++;
            assert_true(starts <= 4);
            start_host(&host, e, "poison", log, extra);
            starts++;
        }
        it_sleep_ms(50);
    }
    it_msg *dl = NULL;
    size_t n = wait_dead_letters(&dl, e, "poison", 1);
    char *id = first_id(e, "ids.txt");
    check_dead_letter(e, &dl[0], "poison", "max-deliver", "events." TYPE_SCRIPTED, "4");
    assert_string_equal(it_msg_header(&dl[0], "Ibus-Event-Id"), id);
    it_msgs_free(dl, n);
    /* the process that dead-lettered it is alive and stops cleanly */
    assert_true(it_proc_running(&host));
    it_finish_hosts(e, "poison", &host, 1, it_timeout(60000));

    /* The handler crashed on exactly the three allowed attempts, never
     * on a fourth. The event's other handler (`second`) spent none of its
     * attempts on those crashes: it ran once, when the crashing handler
     * was dead-lettered without running, and succeeded. */
    char **lines = NULL;
    size_t nl = it_file_read_lines(&lines, log);
    size_t crash_lines = 0, second_ok = 0;
    printf("crashes=%d host starts=%d handler runs=%zu\n", crashes, starts, nl);
    assert_int_equal(crashes, 3);
    for (size_t i = 0; i < nl; i++) {
        char consumer[128], dc[16], verdict[16];
        assert_true(it_field(consumer, sizeof(consumer), lines[i], 0));
        assert_true(it_field(dc, sizeof(dc), lines[i], 3));
        assert_true(it_field(verdict, sizeof(verdict), lines[i], 4));
        if (strcmp(consumer, "poison/scripted/second") == 0) {
            assert_string_equal(verdict, "ok");
            second_ok++;
            continue;
        }
        assert_string_equal(verdict, "crash");
        assert_true(atoi(dc) <= 3);
        crash_lines++;
    }
    assert_int_equal(crash_lines, (size_t)crashes);
    assert_true(second_ok <= 1);
    it_lines_free(lines, nl);
    /* never marked, but the key keeps the ended claim of the process that
     * crashed: known by it, so the quiet "not processed" */
    assert_int_equal(it_marker_lookup(e, "poison/scripted/scripted", id), 3);
    free(id);
    it_done(e);
}

static void raw_bytes_dead_lettered(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host;
    it_msg *dl = NULL;
    /* plain text, and a protobuf varint where Event.id wants a string */
    const char *payloads[] = {"this is not an event", "\x08\x96\x01"};

    start_host(&host, e, "raw", it_path(log, e, "calls.log"), NULL);
    assert_int_equal(it_publish(NULL, e, NULL, "--raw", "--subject", "events.raw", payloads[0],
                                payloads[1], NULL),
                     0);
    size_t n = wait_dead_letters(&dl, e, "raw", 2);
    for (size_t i = 0; i < n; i++) {
        check_dead_letter(e, &dl[i], "raw", "decode", "events.raw", "1");
        assert_int_equal(dl[i].len, strlen(payloads[i]));
        assert_memory_equal(dl[i].data, payloads[i], dl[i].len);
        assert_null(it_msg_header(&dl[i], "Ibus-Event-Id"));
    }
    it_msgs_free(dl, n);
    it_finish_hosts(e, "raw", &host, 1, it_timeout(60000));
    assert_int_equal(it_file_lines(log), 0);
    it_done(e);
}

static void malformed_id_dead_lettered(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host;
    it_msg *dl = NULL;

    start_host(&host, e, "badid", it_path(log, e, "calls.log"), NULL);
    /* not a UUID at all; then a well-formed uuid1, which the host (uuid4
     * only by default) refuses too */
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--unchecked-id", "--id",
                                "not-a-uuid", "ok", NULL),
                     0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--id",
                                "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "ok", NULL),
                     0);
    size_t n = wait_dead_letters(&dl, e, "badid", 2);
    for (size_t i = 0; i < n; i++) {
        check_dead_letter(e, &dl[i], "badid", "invalid-id", "events." TYPE_SCRIPTED, "1");
        /* an id the host refused is not vouched for in a header */
        assert_null(it_msg_header(&dl[i], "Ibus-Event-Id"));
    }
    /* the original event bytes carry the id as the producer wrote it */
    assert_non_null(memmem(dl[0].data, dl[0].len, "not-a-uuid", 10));
    it_msgs_free(dl, n);
    it_finish_hosts(e, "badid", &host, 1, it_timeout(60000));
    assert_int_equal(it_file_lines(log), 0);

    it_summary sum;
    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    assert_int_equal(sum.received, 2);
    assert_int_equal(sum.dead_lettered, 2);
    assert_int_equal(sum.handled, 0);
    it_done(e);
}

/* Publishes from the test's own connection, with headers given as
 * key/value pairs (NULL-terminated). */
static void publish_with_headers(it_env *e, const char *subject, const void *data, size_t len, ...)
{
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    va_list ap;
    assert_int_equal(natsMsg_Create(&m, subject, NULL, data, (int)len), NATS_OK);
    va_start(ap, len);
    for (const char *k; (k = va_arg(ap, const char *)) != NULL;)
        assert_int_equal(natsMsgHeader_Add(m, k, va_arg(ap, const char *)), NATS_OK);
    va_end(ap);
    assert_non_null(it_server_js(&e->server));
    assert_int_equal(js_PublishMsg(&pa, it_server_js(&e->server), m, NULL, &jerr), NATS_OK);
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
}

/* An empty body with a Status header, stored in the stream like any
 * message: it comes with a $JS.ACK reply subject, so it is a delivery, not
 * a server status, and must end as a decode dead letter (cause 5). It used
 * to be destroyed unacked, redelivered forever. */
static void status_lookalike_dead_lettered(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host;
    it_msg *dl = NULL;
    it_summary sum;

    start_host(&host, e, "status", it_path(log, e, "calls.log"), NULL);
    publish_with_headers(e, "events.status", NULL, 0, "Status", "503", "Description",
                         "No Responders", NULL);
    size_t n = wait_dead_letters(&dl, e, "status", 1);
    check_dead_letter(e, &dl[0], "status", "decode", "events.status", "1");
    assert_int_equal(dl[0].len, 0);
    /* the original's headers travel with it */
    assert_non_null(it_msg_header(&dl[0], "Status"));
    assert_string_equal(it_msg_header(&dl[0], "Status"), "503");
    it_msgs_free(dl, n);
    it_finish_hosts(e, "status", &host, 1, it_timeout(60000));
    assert_int_equal(it_file_lines(log), 0);
    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    assert_int_equal(sum.received, 1);
    assert_int_equal(sum.dead_lettered, 1);
    it_done(e);
}

/* Two durables on one stream REJECT the same message into one DLQ stream
 * (cause 7). Both dead letters must arrive: their Nats-Msg-Id names the
 * durable, so the DLQ stream's duplicate window does not drop the second.
 * Each keeps the original's headers, but not its Nats-Msg-Id. */
static void two_durables_one_dead_letter_stream(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], id[IB_ID_BUF_SIZE], want[128];
    const char *durables[2] = {"dla", "dlb"};
    const char *extra[] = {"--dead-letter", "ibus.dlq.shared", NULL};
    it_proc hosts[2];
    uint8_t *bytes = NULL;
    size_t len = 0;
    ib_error err;

    it_path(log, e, "calls.log");
    for (int i = 0; i < 2; i++)
        start_host(&hosts[i], e, durables[i], log, extra);
    /* the first host's --create made DLQ_dla capture the shared subject */
    assert_int_equal(ib_uuid4_generate(id), IB_OK);
    ib_event_fields f = {.id = id, .type = TYPE_SCRIPTED, .payload = "reject", .payload_len = 6};
    assert_int_equal(ib_event_encode(&bytes, &len, &f, &err), IB_OK);
    publish_with_headers(e, "events." TYPE_SCRIPTED, bytes, len, "Trace-Id", "trace-77", "X-Multi",
                         "one", "X-Multi", "two", "Nats-Msg-Id", id, NULL);
    free(bytes);

    assert_int_equal(it_wait_stream_count(&e->server, "DLQ_dla", 2, it_timeout(30000)), 2);
    it_msg *dl = NULL;
    size_t n = it_stream_read_all(&dl, &e->server, "DLQ_dla");
    assert_int_equal(n, 2);
    bool seen[2] = {false, false};
    for (size_t i = 0; i < n; i++) {
        const char *durable = it_msg_header(&dl[i], "Ibus-Consumer");
        assert_non_null(durable);
        int which = strcmp(durable, "dla") == 0 ? 0 : 1;
        assert_string_equal(durable, durables[which]);
        seen[which] = true;
        assert_string_equal(it_msg_header(&dl[i], "Ibus-Reason"), "rejected");
        assert_string_equal(it_msg_header(&dl[i], "Ibus-Event-Id"), id);
        snprintf(want, sizeof(want), "%s:%s:%s", IT_STREAM, durable,
                 it_msg_header(&dl[i], "Ibus-Stream-Seq"));
        assert_string_equal(it_msg_header(&dl[i], "Nats-Msg-Id"), want);
        assert_string_equal(it_msg_header(&dl[i], "Trace-Id"), "trace-77");
        assert_string_equal(it_msg_header(&dl[i], "X-Multi"), "one");
    }
    assert_true(seen[0] && seen[1]);
    it_msgs_free(dl, n);
    for (int i = 0; i < 2; i++)
        it_finish_hosts(e, durables[i], &hosts[i], 1, it_timeout(60000));
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(reject_dead_lettered, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(poison_crash_dead_lettered, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(raw_bytes_dead_lettered, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(malformed_id_dead_lettered, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(status_lookalike_dead_lettered, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(two_durables_one_dead_letter_stream, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
