/* SPDX-License-Identifier: Apache-2.0 */
/* Dead letters come back (issue 22): a dead letter ends the event's
 * attempts, so a republish by hand or `ibus dlq replay` runs the handlers
 * that had failed, once, and those that had succeeded not again; a second
 * replay runs nothing; a handler that crashes the process is dead-lettered
 * again after its attempts on each replay; --purge deletes only what was
 * acked (a kill between the publish and the delete loses nothing); conflict
 * dead letters need --force; every filter of ibus dlq selects what it says,
 * and --json parses; a replay publishes only where its dead letter
 * belongs, and a kill between a dead letter and the end of its attempts
 * leaves nothing stuck (issue 32); a dead letter names the handler whose
 * verdict it was, and its reason (issue 45). A real nats-server, real ibus processes,
 * the scripted test plugin. */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "ib_test.h"
#include "it_support.h"

#define TYPE_SCRIPTED "test.scripted"

/* ibus run for `durable` with the scripted plugin: its log `log`, its
 * second handler's verdict `second`, and `extra` flags. */
static void start_host(it_proc *host, it_env *e, const char *durable, const char *log,
                       const char *second, const char *const *extra)
{
    char cfg[PATH_MAX + 64];
    it_argv a;
    it_argv_run(&a, e, durable);
    snprintf(cfg, sizeof(cfg), "file=%s,second=%s", log, second);
    it_argv_plugin(&a, "scripted", cfg);
    for (; extra != NULL && *extra != NULL; extra++)
        it_argv_add(&a, *extra);
    assert_true(it_spawn(host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
}

/* Runs `ibus dlq --durable DURABLE ARGS...` (NULL-terminated); returns its
 * status, `p` keeps its output. */
static int run_dlq(it_proc *p, it_env *e, const char *durable, ...) __attribute__((sentinel));
static int run_dlq(it_proc *p, it_env *e, const char *durable, ...)
{
    it_argv a;
    va_list ap;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "dlq", NULL);
    it_argv_connect(&a, &e->server);
    if (durable != NULL)
        it_argv_addl(&a, "--durable", durable, NULL);
    va_start(ap, durable);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    int st = it_proc_run(p, e->dir, "dlq", NULL, a.v, it_timeout(60000));
    it_argv_free(&a);
    return st;
}

/* Runs `ibus markers` on the hosts' marker file with --consumer (unless
 * NULL) and the arguments (NULL-terminated); returns its
 * status, `p` keeps its output. */
static int run_markers(it_proc *p, it_env *e, const char *consumer, const char *a1, const char *a2,
                       ...) __attribute__((sentinel));
static int run_markers(it_proc *p, it_env *e, const char *consumer, const char *a1, const char *a2,
                       ...)
{
    char db[PATH_MAX];
    it_argv a;
    va_list ap;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", NULL);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "markers.db"));
    if (consumer != NULL)
        it_argv_addl(&a, "--consumer", consumer, NULL);
    it_argv_add(&a, a1);
    if (a2 != NULL) {
        it_argv_add(&a, a2);
        va_start(ap, a2);
        for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
            it_argv_add(&a, s);
        va_end(ap);
    }
    int st = it_proc_run(p, e->dir, "markers", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    return st;
}

/* Lines of the scripted log for `consumer` and `id` with `verdict`. */
static size_t calls(const char *log, const char *consumer, const char *id, const char *verdict)
{
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, log), count = 0;
    for (size_t i = 0; i < n; i++) {
        char c[300], got_id[64], v[16];
        if (it_field(c, sizeof(c), lines[i], 0) && it_field(got_id, sizeof(got_id), lines[i], 1) &&
            it_field(v, sizeof(v), lines[i], 4) && strcmp(c, consumer) == 0 &&
            strcmp(got_id, id) == 0 && strcmp(v, verdict) == 0)
            count++;
    }
    it_lines_free(lines, n);
    return count;
}

/* Waits until the scripted log has `n` such lines. */
static void wait_calls(const char *log, const char *consumer, const char *id, const char *verdict,
                       size_t n)
{
    int64_t deadline = it_now_ms() + it_timeout(60000);
    while (calls(log, consumer, id, verdict) < n) {
        if (it_now_ms() > deadline)
            fail_msg("%s: %zu of %zu '%s' calls of %s", log, calls(log, consumer, id, verdict), n,
                     verdict, consumer);
        it_sleep_ms(50);
    }
}

static uint64_t dlq_count(it_env *e, const char *durable)
{
    char dlq[128];
    snprintf(dlq, sizeof(dlq), "DLQ_%s", durable);
    return it_stream_count(&e->server, dlq);
}

static void wait_dlq(it_env *e, const char *durable, uint64_t n)
{
    char dlq[128];
    snprintf(dlq, sizeof(dlq), "DLQ_%s", durable);
    assert_int_equal(it_wait_stream_count(&e->server, dlq, n, it_timeout(60000)), n);
}

static char *published_id(it_env *e, const char *file)
{
    char path[PATH_MAX], **lines = NULL;
    size_t n = it_file_read_lines(&lines, it_path(path, e, file));
    assert_true(n >= 1);
    char *id = strdup(lines[0]);
    it_lines_free(lines, n);
    return id;
}

/* Publishes one scripted event with payload `text`; returns its id. */
static char *publish_one(it_env *e, const char *file, const char *text)
{
    char ids[PATH_MAX];
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--ids-file",
                                it_path(ids, e, file), text, NULL),
                     0);
    return published_id(e, file);
}

static const char *const retry_flags[] = {
    "--max-deliver", "2", "--retry-delay", "100ms", "--retry-max-delay", "200ms", NULL};

/* The second handler RETRYs until its attempts are spent: dead-lettered
 * with max-deliver, the first handler marked. Leaves the host stopped. */
static char *fail_to_dead_letter(it_env *e, const char *durable, const char *log)
{
    it_proc host;
    char consumer[128];
    start_host(&host, e, durable, log, "retry", retry_flags);
    char *id = publish_one(e, "ids.txt", "ok");
    wait_dlq(e, durable, 1);
    it_finish_hosts(e, durable, &host, 1, it_timeout(60000));
    snprintf(consumer, sizeof(consumer), "%s/scripted/second", durable);
    assert_int_equal(calls(log, consumer, id, "retry"), 2);
    /* the failing handler never marked anything: lookup refuses its
     * identity rather than guess (exit 2), naming the one it knows; the
     * dead letter ended the attempts: stats says so */
    it_proc p;
    assert_int_equal(run_markers(&p, e, consumer, "lookup", id, NULL), 2);
    char known[160];
    snprintf(known, sizeof(known), "has no markers of that identity; it knows %s/scripted/scripted",
             durable);
    assert_true(it_file_contains(p.err_path, known));
    assert_int_equal(run_markers(&p, e, NULL, "--max-deliver", "2", "stats", NULL), 0);
    assert_true(it_file_contains(p.out_path, "attempted=0 exhausted=0"));
    snprintf(consumer, sizeof(consumer), "%s/scripted/scripted", durable);
    assert_int_equal(it_marker_lookup(e, consumer, id), 0);
    return id;
}

/* Fail, dead letter, fix, republish by hand (same id, same bytes): the
 * failed handler runs once with a fresh budget, the one that had
 * succeeded does not run again, and nothing is dead-lettered again. The
 * bug was an instant second dead letter "max-deliver after 1 deliveries". */
static void republish_by_hand_runs_once(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host;
    it_path(log, e, "calls.log");
    char *id = fail_to_dead_letter(e, "hand", log);

    start_host(&host, e, "hand", log, "ok", retry_flags);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--id", id, "ok", NULL), 0);
    wait_calls(log, "hand/scripted/second", id, "ok", 1);
    it_finish_hosts(e, "hand", &host, 1, it_timeout(60000));
    assert_int_equal(calls(log, "hand/scripted/second", id, "ok"), 1);
    assert_int_equal(calls(log, "hand/scripted/scripted", id, "ok"), 1);
    assert_int_equal(dlq_count(e, "hand"), 1);
    assert_int_equal(it_marker_lookup(e, "hand/scripted/second", id), 0);
    free(id);
    it_done(e);
}

/* The same through ibus dlq replay: the replay carries the original bytes
 * and the replay id; a second replay is dropped (the same Nats-Msg-Id in
 * JetStream's window) and runs nothing. */
static void replay_runs_once_second_replay_nothing(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host, dlq;
    it_path(log, e, "calls.log");
    char *id = fail_to_dead_letter(e, "rep", log);
    uint64_t events_before = it_stream_count(&e->server, IT_STREAM);

    start_host(&host, e, "rep", log, "ok", retry_flags);
    assert_int_equal(run_dlq(&dlq, e, "rep", "replay", NULL), 0);
    assert_true(it_file_contains(dlq.out_path, "replayed=1 duplicates=0 skipped=0 failed=0"));
    wait_calls(log, "rep/scripted/second", id, "ok", 1);
    assert_int_equal(run_dlq(&dlq, e, "rep", "replay", NULL), 0);
    assert_true(it_file_contains(dlq.out_path, "replayed=1 duplicates=1"));
    it_finish_hosts(e, "rep", &host, 1, it_timeout(60000));

    assert_int_equal(calls(log, "rep/scripted/second", id, "ok"), 1);
    assert_int_equal(calls(log, "rep/scripted/scripted", id, "ok"), 1);
    assert_int_equal(dlq_count(e, "rep"), 1);
    /* one replay stored: the original bytes, the replay's Nats-Msg-Id */
    assert_int_equal(it_stream_count(&e->server, IT_STREAM), events_before + 1);
    it_msg orig, dl, replayed;
    assert_true(it_stream_get(&orig, &e->server, IT_STREAM, 1));
    assert_true(it_stream_get(&dl, &e->server, "DLQ_rep", 1));
    assert_true(it_stream_get(&replayed, &e->server, IT_STREAM, events_before + 1));
    assert_string_equal(replayed.subject, orig.subject);
    assert_int_equal(replayed.len, orig.len);
    assert_memory_equal(replayed.data, orig.data, orig.len);
    assert_string_equal(it_msg_header(&replayed, "Nats-Msg-Id"), "ibus-replay:DLQ_rep:1");
    assert_null(it_msg_header(&replayed, "Ibus-Reason"));
    it_msg_clear(&orig);
    it_msg_clear(&dl);
    it_msg_clear(&replayed);
    free(id);
    it_done(e);
}

/* One of two handlers REJECTs; after the fix only that one runs on the
 * replay, and --purge empties the dead-letter stream. */
static void reject_only_that_handler_runs_on_replay(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host, dlq;
    it_path(log, e, "calls.log");
    start_host(&host, e, "rj", log, "reject", NULL);
    char *id = publish_one(e, "ids.txt", "ok");
    wait_dlq(e, "rj", 1);
    it_finish_hosts(e, "rj", &host, 1, it_timeout(60000));
    assert_int_equal(calls(log, "rj/scripted/second", id, "reject"), 1);

    start_host(&host, e, "rj", log, "ok", NULL);
    assert_int_equal(run_dlq(&dlq, e, "rj", "replay", "--purge", "--reason", "rejected", NULL), 0);
    assert_true(it_file_contains(dlq.out_path, "replayed=1 duplicates=0 skipped=0 failed=0 "
                                               "purged=1"));
    wait_calls(log, "rj/scripted/second", id, "ok", 1);
    it_finish_hosts(e, "rj", &host, 1, it_timeout(60000));
    assert_int_equal(calls(log, "rj/scripted/second", id, "ok"), 1);
    assert_int_equal(calls(log, "rj/scripted/scripted", id, "ok"), 1);
    assert_int_equal(dlq_count(e, "rj"), 0);
    free(id);
    it_done(e);
}

/* --purge deletes a dead letter only after its replay is acked: a replay
 * killed between the publish and the delete leaves the dead letter; the
 * next replay's publish is a duplicate JetStream drops, then it deletes.
 * The handler runs once. */
static void purge_only_after_the_ack(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host, dlq;
    it_path(log, e, "calls.log");
    start_host(&host, e, "kil", log, "reject", NULL);
    char *id = publish_one(e, "ids.txt", "ok");
    wait_dlq(e, "kil", 1);
    it_finish_hosts(e, "kil", &host, 1, it_timeout(60000));

    start_host(&host, e, "kil", log, "ok", NULL);
    setenv("IB_TEST_DLQ_KILL_BEFORE_DELETE", "1", 1);
    int st = run_dlq(&dlq, e, "kil", "replay", "--purge", NULL);
    unsetenv("IB_TEST_DLQ_KILL_BEFORE_DELETE");
    assert_int_equal(st, -SIGKILL);
    assert_int_equal(dlq_count(e, "kil"), 1); /* nothing lost */
    wait_calls(log, "kil/scripted/second", id, "ok", 1);

    assert_int_equal(run_dlq(&dlq, e, "kil", "replay", "--purge", NULL), 0);
    assert_true(it_file_contains(dlq.out_path, "replayed=1 duplicates=1 skipped=0 failed=0 "
                                               "purged=1"));
    assert_int_equal(dlq_count(e, "kil"), 0);
    it_finish_hosts(e, "kil", &host, 1, it_timeout(60000));
    assert_int_equal(calls(log, "kil/scripted/second", id, "ok"), 1);
    free(id);
    it_done(e);
}

/* Restarts the host after each crash until the dead-letter stream holds
 * `n` messages; returns the crashes seen. */
static int crash_until_dead_lettered(it_env *e, it_proc *host, const char *log, uint64_t n)
{
    static const char *const flags[] = {"--max-deliver", "2",     "--ack-wait", "2s",
                                        "--retry-delay", "100ms", NULL};
    int crashes = 0;
    int64_t deadline = it_now_ms() + it_timeout(120000);
    while (dlq_count(e, "crash") < n) {
        assert_true(it_now_ms() < deadline);
        if (!it_proc_running(host)) {
            assert_int_equal(host->status, -SIGABRT);
            crashes++;
            assert_true(crashes <= 3);
            start_host(host, e, "crash", log, "ok", flags);
        }
        it_sleep_ms(50);
    }
    return crashes;
}

/* A handler that aborts the process on every run is dead-lettered after
 * its --max-deliver attempts, and again after as many on each replay: the
 * fresh budget is a budget, not a pass. */
static void crashing_handler_dead_lettered_on_each_replay(void **state)
{
    static const char *const flags[] = {"--max-deliver", "2",     "--ack-wait", "2s",
                                        "--retry-delay", "100ms", NULL};
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host, dlq;
    it_path(log, e, "calls.log");
    start_host(&host, e, "crash", log, "ok", flags);
    char *id = publish_one(e, "ids.txt", "crash");
    assert_int_equal(crash_until_dead_lettered(e, &host, log, 1), 2);
    assert_int_equal(calls(log, "crash/scripted/scripted", id, "crash"), 2);
    for (int round = 1; round <= 2; round++) {
        assert_int_equal(run_dlq(&dlq, e, "crash", "replay", "--purge", NULL), 0);
        assert_true(it_file_contains(dlq.out_path, "purged=1"));
        assert_int_equal(crash_until_dead_lettered(e, &host, log, 1), 2);
        assert_int_equal(calls(log, "crash/scripted/scripted", id, "crash"),
                         (size_t)(2 + 2 * round));
    }
    it_finish_hosts(e, "crash", &host, 1, it_timeout(60000));
    /* never marked, but the key keeps the ended claim of the process that
     * crashed: known by it, so the quiet "not processed" */
    assert_int_equal(it_marker_lookup(e, "crash/scripted/scripted", id), 3);
    free(id);
    it_done(e);
}

/* A conflict dead letter replays into a conflict: skipped without
 * --force; with --force it is replayed as it is (and conflicts again while
 * the id stays marked); after forgetting the id's markers, --force runs
 * its handlers with the dead letter's content. */
static void conflict_needs_force(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], db[PATH_MAX];
    it_proc host, dlq, forget;
    it_path(log, e, "calls.log");
    start_host(&host, e, "cf", log, "ok", NULL);
    char *id = publish_one(e, "ids.txt", "ok");
    wait_calls(log, "cf/scripted/second", id, "ok", 1);
    assert_int_equal(
        it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--id", id, "changed", NULL), 0);
    wait_dlq(e, "cf", 1);
    assert_int_equal(run_dlq(&dlq, e, "cf", "replay", NULL), 0);
    assert_true(it_file_contains(dlq.out_path, "skipped (conflict"));
    assert_true(it_file_contains(dlq.out_path, "replayed=0 duplicates=0 skipped=1"));
    assert_int_equal(run_dlq(&dlq, e, "cf", "replay", "--force", "--purge", NULL), 0);
    wait_dlq(e, "cf", 1); /* purged, and dead-lettered again */
    it_finish_hosts(e, "cf", &host, 1, it_timeout(60000));
    assert_int_equal(calls(log, "cf/scripted/scripted", id, "ok"), 1);

    const char *consumers[] = {"cf/scripted/scripted", "cf/scripted/second"};
    for (int i = 0; i < 2; i++) {
        it_argv a;
        it_argv_init(&a);
        it_argv_addl(&a, it_ibus(), "markers", NULL);
        it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "markers.db"));
        it_argv_addl(&a, "--consumer", consumers[i], "forget", id, NULL);
        assert_int_equal(it_proc_run(&forget, e->dir, "forget", NULL, a.v, it_timeout(30000)), 0);
        it_argv_free(&a);
    }
    start_host(&host, e, "cf", log, "ok", NULL);
    assert_int_equal(run_dlq(&dlq, e, "cf", "replay", "--force", "--purge", NULL), 0);
    wait_calls(log, "cf/scripted/scripted", id, "ok", 2);
    it_finish_hosts(e, "cf", &host, 1, it_timeout(60000));
    assert_int_equal(dlq_count(e, "cf"), 0);
    assert_int_equal(calls(log, "cf/scripted/scripted", id, "ok"), 2);
    free(id);
    it_done(e);
}

/* How many JSON lines `ibus dlq list --json FILTERS` prints; each must
 * parse and carry the fields a script reads. */
static size_t list_json(it_env *e, const char *first, ...)
{
    it_proc p;
    it_argv a;
    va_list ap;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "dlq", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_addl(&a, "--durable", "flt", "list", "--json", NULL);
    va_start(ap, first);
    for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    assert_int_equal(it_proc_run(&p, e->dir, "dlq", NULL, a.v, it_timeout(60000)), 0);
    it_argv_free(&a);
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, p.out_path);
    for (size_t i = 0; i < n; i++) {
        json_error_t jerr;
        json_t *o = json_loads(lines[i], JSON_REJECT_DUPLICATES, &jerr);
        if (o == NULL)
            fail_msg("not JSON (%s): %s", jerr.text, lines[i]);
        assert_true(json_is_integer(json_object_get(o, "seq")));
        assert_true(json_is_string(json_object_get(o, "time")));
        assert_true(json_is_string(json_object_get(o, "reason")));
        assert_string_equal(json_string_value(json_object_get(o, "consumer")), "flt");
        assert_true(json_is_integer(json_object_get(o, "deliveries")));
        json_decref(o);
    }
    it_lines_free(lines, n);
    return n;
}

static void iso_time(char *out, size_t cap, int64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Three dead letters (rejected, rejected of another type, decode); every
 * filter selects what it names; show prints the headers and the decoded
 * event; purge needs --yes and counts; bad usage exits 2. */
static void filters_show_and_purge(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids[PATH_MAX], later[40], earlier[40];
    it_proc host, p;
    it_path(log, e, "calls.log");
    start_host(&host, e, "flt", log, "reject", NULL);
    char *id = publish_one(e, "ids.txt", "ok");
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.other", "--ids-file",
                                it_path(ids, e, "other.txt"), "reject", NULL),
                     0);
    char *other = published_id(e, "other.txt");
    assert_int_equal(it_publish(NULL, e, NULL, "--raw", "--subject", "events.raw", "junk", NULL),
                     0);
    wait_dlq(e, "flt", 3);
    it_finish_hosts(e, "flt", &host, 1, it_timeout(60000));

    iso_time(later, sizeof(later), time(NULL) * 1000LL + 3600000);
    iso_time(earlier, sizeof(earlier), time(NULL) * 1000LL - 3600000);
    assert_int_equal(list_json(e, NULL), 3);
    assert_int_equal(list_json(e, "--reason", "rejected", NULL), 2);
    assert_int_equal(list_json(e, "--reason", "decode", NULL), 1);
    assert_int_equal(list_json(e, "--reason", "max-deliver", NULL), 0);
    assert_int_equal(list_json(e, "--type", "test.other", NULL), 1);
    assert_int_equal(list_json(e, "--id", other, NULL), 1);
    assert_int_equal(list_json(e, "--id", id, "--type", "test.other", NULL), 0);
    assert_int_equal(list_json(e, "--consumer", "flt", NULL), 3);
    assert_int_equal(list_json(e, "--consumer", "nobody", NULL), 0);
    assert_int_equal(list_json(e, "--since", "1h", NULL), 3);
    assert_int_equal(list_json(e, "--until", "1h", NULL), 0);
    assert_int_equal(list_json(e, "--since", later, NULL), 0);
    assert_int_equal(list_json(e, "--since", earlier, "--until", later, NULL), 3);

    assert_int_equal(run_dlq(&p, e, "flt", "list", NULL), 0);
    assert_true(it_file_contains(p.out_path, "REASON"));
    assert_true(it_file_contains(p.out_path, other));
    assert_int_equal(run_dlq(&p, e, "flt", "show", "1", NULL), 0);
    assert_true(it_file_contains(p.out_path, "Ibus-Reason: rejected"));
    assert_true(it_file_contains(p.out_path, "Ibus-Subject: events." TYPE_SCRIPTED));
    assert_true(it_file_contains(p.out_path, id));
    assert_true(it_file_contains(p.out_path, "payload (text, 2 bytes): ok"));
    assert_int_equal(run_dlq(&p, e, "flt", "show", "3", NULL), 0);
    assert_true(it_file_contains(p.out_path, "does not decode"));
    assert_int_equal(run_dlq(&p, e, "flt", "replay", "--dry-run", "--type", "test.other", NULL), 0);
    assert_true(it_file_contains(p.out_path, "would_replay=1"));
    assert_int_equal(dlq_count(e, "flt"), 3);

    assert_int_equal(run_dlq(&p, e, "flt", "list", "--reason", "bogus", NULL), 2);
    assert_true(it_file_contains(p.err_path, "--reason: unknown reason 'bogus'"));
    assert_int_equal(run_dlq(&p, e, "nosuch", "list", NULL), 2);
    assert_true(it_file_contains(p.err_path, "no dead-letter stream DLQ_nosuch"));
    assert_int_equal(run_dlq(&p, e, "flt", "show", "99", NULL), 1);
    assert_int_equal(run_dlq(&p, e, "flt", "purge", "--reason", "decode", NULL), 2);
    assert_int_equal(run_dlq(&p, e, "flt", "purge", "--reason", "decode", "--yes", NULL), 0);
    assert_true(it_file_contains(p.out_path, "purged=1 failed=0"));
    assert_int_equal(list_json(e, NULL), 2);
    free(id);
    free(other);
    it_done(e);
}

/* Publishes a dead letter by hand to the dead-letter subject of durable
 * "forge", as anyone allowed to publish there could: `subject` and
 * `stream` become its Ibus-Subject and Ibus-Stream (NULL: left out). */
static void forge(it_env *e, const char *subject, const char *stream)
{
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(natsMsg_Create(&m, "ibus.dlq.forge", NULL, "forged", 6), NATS_OK);
    assert_int_equal(natsMsgHeader_Set(m, "Ibus-Reason", "rejected"), NATS_OK);
    assert_int_equal(natsMsgHeader_Set(m, "Ibus-Consumer", "forge"), NATS_OK);
    if (subject != NULL)
        assert_int_equal(natsMsgHeader_Set(m, "Ibus-Subject", subject), NATS_OK);
    if (stream != NULL)
        assert_int_equal(natsMsgHeader_Set(m, "Ibus-Stream", stream), NATS_OK);
    assert_int_equal(js_PublishMsg(&pa, it_server_js(&e->server), m, NULL, &jerr), NATS_OK);
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
}

/* Issue 32, item 1: a dead letter is input, not an order. Forged dead
 * letters naming a JetStream API subject (a purge of the events stream),
 * an _INBOX, a subject of another stream, a subject of no stream, no
 * stream at all or a subject that is not one are skipped with a reason,
 * --force or not; only the one whose subject belongs to the stream it
 * names is replayed. --dry-run names every target subject. The bug: the
 * purge was published with the operator's rights, the stream emptied, and
 * the tool said replayed. */
static void forged_dead_letters_go_nowhere(void **state)
{
    static const struct {
        const char *subject, *stream, *why;
    } forged[] = {
        {"$JS.API.STREAM.PURGE.EVENTS", "EVENTS", "the target is a $ subject"},
        {"_INBOX.forged.1", "EVENTS", "is an _INBOX subject"},
        {"other.x", "EVENTS", "the target belongs to stream OTHER, not EVENTS"},
        {"nowhere.x", "EVENTS", "no stream captures the target"},
        {"events.x", NULL, "no Ibus-Stream"},
        {"events.x y", "EVENTS", "holds a space"},
        {"events.x", "EV.ENTS", "Ibus-Stream 'EV.ENTS' holds '.'"},
        {"events.replayed", "EVENTS", NULL},
    };
    enum { N = sizeof(forged) / sizeof(forged[0]) };
    it_env *e = *state;
    it_proc p;
    assert_true(it_stream_add(&e->server, IT_STREAM, IT_SUBJECTS, 0));
    assert_true(it_stream_add(&e->server, "OTHER", "other.>", 0));
    assert_true(it_stream_add(&e->server, "DLQ_forge", "ibus.dlq.forge", 0));
    assert_true(it_js_publish_id(NULL, &e->server, "events.keep", "keep-1", "k", 1));
    assert_true(it_js_publish_id(NULL, &e->server, "other.keep", "keep-2", "k", 1));
    for (size_t i = 0; i < N; i++)
        forge(e, forged[i].subject, forged[i].stream);

    for (int force = 0; force <= 1; force++) {
        assert_int_equal(
            run_dlq(&p, e, "forge", "replay", "--dry-run", force ? "--force" : NULL, NULL), 0);
        char *out = it_file_read(NULL, p.out_path);
        assert_non_null(out);
        for (size_t i = 0; i < N; i++) {
            char line[512];
            if (forged[i].why == NULL)
                snprintf(line, sizeof(line), "would replay dead letter %zu (rejected, id -) to %s",
                         i + 1, forged[i].subject);
            else
                snprintf(line, sizeof(line), "skipped dead letter %zu", i + 1);
            if (strstr(out, line) == NULL ||
                (forged[i].why != NULL && strstr(out, forged[i].why) == NULL))
                fail_msg("dry run (force %d) does not say '%s' ... '%s':\n%s", force, line,
                         forged[i].why != NULL ? forged[i].why : "", out);
        }
        assert_non_null(strstr(out, "would_replay=1 duplicates=0 skipped=7 failed=0"));
        free(out);
    }
    /* --json: one object per dead letter, with the target and the reason */
    assert_int_equal(run_dlq(&p, e, "forge", "replay", "--dry-run", "--json", NULL), 0);
    char **lines = NULL;
    assert_int_equal(it_file_read_lines(&lines, p.out_path), N);
    for (size_t i = 0; i < N; i++) {
        json_t *o = json_loads(lines[i], 0, NULL);
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "seq")), (json_int_t)(i + 1));
        assert_string_equal(json_string_value(json_object_get(o, "subject")), forged[i].subject);
        const char *why = json_string_value(json_object_get(o, "why"));
        assert_true(forged[i].why == NULL ? why == NULL : strstr(why, forged[i].why) != NULL);
        json_decref(o);
    }
    it_lines_free(lines, N);
    assert_int_equal(run_dlq(&p, e, "forge", "replay", "--force", "--purge", NULL), 0);
    assert_true(
        it_file_contains(p.out_path, "replayed=1 duplicates=0 skipped=7 failed=0 purged=1"));
    /* nothing was purged, nothing reached another stream, one replay */
    assert_int_equal(it_stream_count(&e->server, IT_STREAM), 2);
    assert_int_equal(it_stream_count(&e->server, "OTHER"), 1);
    it_msg m;
    assert_true(it_stream_get(&m, &e->server, IT_STREAM, 2));
    assert_string_equal(m.subject, "events.replayed");
    it_msg_clear(&m);
    /* the skipped stay in the dead-letter stream, the replayed one went */
    assert_int_equal(dlq_count(e, "forge"), N - 1);
    /* a name that would break an API subject is refused before connecting */
    assert_int_equal(run_dlq(&p, e, "for\rge", "list", NULL), 2);
    assert_true(it_file_contains(p.err_path, "--durable 'for\\x0dge': holds a control byte"));
    it_done(e);
}

/* Issue 32, item 5: a replay always runs. The host is killed after a dead
 * letter's publish was acknowledged and before the event's attempts were
 * ended (IB_TEST_KILL_BEFORE_END_ATTEMPTS). Today's order sent the +TERM
 * first, so nothing came back to end them, and the replay was dead-lettered
 * at once as max-deliver without running the handler. Ending the attempts
 * before the +TERM makes the original come back after AckWait, be
 * dead-lettered again (the dead-letter stream drops the copy) and end them;
 * the replay then runs the handler that had failed, once. */
static void replay_runs_after_a_kill_before_attempts_end(void **state)
{
    static const char *const flags[] = {
        "--max-deliver", "2", "--retry-delay", "100ms", "--ack-wait", "2s", "--retry-max-delay",
        "200ms",         NULL};
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host, dlq;
    it_path(log, e, "calls.log");
    setenv("IB_TEST_KILL_BEFORE_END_ATTEMPTS", "1", 1);
    start_host(&host, e, "kba", log, "retry", flags);
    unsetenv("IB_TEST_KILL_BEFORE_END_ATTEMPTS");
    char *id = publish_one(e, "ids.txt", "ok");
    assert_int_equal(it_proc_wait(&host, it_timeout(60000)), -SIGKILL);
    assert_int_equal(dlq_count(e, "kba"), 1);
    assert_int_equal(calls(log, "kba/scripted/second", id, "retry"), 2);

    start_host(&host, e, "kba", log, "ok", flags);
    assert_true(it_wait_consumer_idle(NULL, &e->server, IT_STREAM, "kba", it_timeout(60000)));
    assert_int_equal(run_dlq(&dlq, e, "kba", "replay", NULL), 0);
    assert_true(it_file_contains(dlq.out_path, "replayed=1 duplicates=0 skipped=0 failed=0"));
    wait_calls(log, "kba/scripted/second", id, "ok", 1);
    it_finish_hosts(e, "kba", &host, 1, it_timeout(60000));
    assert_int_equal(calls(log, "kba/scripted/second", id, "ok"), 1);
    assert_int_equal(calls(log, "kba/scripted/second", id, "retry"), 2);
    assert_int_equal(calls(log, "kba/scripted/scripted", id, "ok"), 1);
    assert_int_equal(dlq_count(e, "kba"), 1); /* the copy was dropped, no new dead letter */
    assert_int_equal(it_marker_lookup(e, "kba/scripted/second", id), 0);
    free(id);
    it_done(e);
}

/* Issue 31: an invalid-id dead letter carries no Ibus-Event-Id or -Type
 * (its event has no valid id to name), yet `list` shows the id it came
 * with, escaped, and its type, which --type then selects. The Event is
 * made by hand: id "bad id" (not a UUID), type "test.bad". */
static void invalid_id_rows_show_id_and_type(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX];
    it_proc host, p;
    static const char event[] = "\x0a\x06"
                                "bad id"
                                "\x12\x08"
                                "test.bad";
    it_path(log, e, "calls.log");
    start_host(&host, e, "flt", log, "ok", NULL);
    assert_int_equal(it_publish(NULL, e, NULL, "--raw", "--subject", "events.bad", event, NULL), 0);
    wait_dlq(e, "flt", 1);
    it_finish_hosts(e, "flt", &host, 1, it_timeout(60000));
    assert_int_equal(list_json(e, "--reason", "invalid-id", "--type", "test.bad", NULL), 1);
    assert_int_equal(run_dlq(&p, e, "flt", "list", "--json", NULL), 0);
    assert_true(it_file_contains(p.out_path, "\"id\":\"bad\\\\x20id\""));
    assert_true(it_file_contains(p.out_path, "\"type\":\"test.bad\""));
    assert_int_equal(run_dlq(&p, e, "flt", "list", NULL), 0);
    assert_true(it_file_contains(p.out_path, "bad\\x20id"));
    assert_true(it_file_contains(p.out_path, "test.bad"));
    it_done(e);
}

/* The JSON line of `ibus dlq --durable DURABLE list --json` for event
 * `id`: its "handler" (or "" when null) and its "error" into the buffers,
 * its seq returned. Fails the test when no line names it. */
static uint64_t listed(it_env *e, const char *durable, const char *id, char *handler, char *error,
                       size_t cap)
{
    it_proc p;
    char **lines = NULL;
    uint64_t seq = 0;
    assert_int_equal(run_dlq(&p, e, durable, "list", "--json", NULL), 0);
    size_t n = it_file_read_lines(&lines, p.out_path);
    for (size_t i = 0; i < n && seq == 0; i++) {
        json_t *o = json_loads(lines[i], 0, NULL);
        assert_non_null(o);
        const char *got = json_string_value(json_object_get(o, "id"));
        if (got != NULL && strcmp(got, id) == 0) {
            const char *h = json_string_value(json_object_get(o, "handler"));
            const char *err = json_string_value(json_object_get(o, "error"));
            snprintf(handler, cap, "%s", h != NULL ? h : "");
            snprintf(error, cap, "%s", err != NULL ? err : "");
            seq = (uint64_t)json_integer_value(json_object_get(o, "seq"));
        }
        json_decref(o);
    }
    it_lines_free(lines, n);
    if (seq == 0)
        fail_msg("ibus dlq list --json names no dead letter of %s", id);
    return seq;
}

/* Issue 45 item 6: a dead letter names the handler whose verdict it was
 * (Ibus-Handler) beside the durable, and the reason that handler gave
 * through verdict_detail. Two handlers of one type: `second` rejects every
 * event with a reason, `scripted` only the one whose payload asks, and
 * that one is named, with its own reason; a third handler, of another
 * type, RETRYs without a reason until its attempts are spent. Before, the
 * list named the durable alone and the two could not be told apart. */
static void dead_letters_name_their_handler(void **state)
{
    static const char *const flags[] = {"--max-deliver", "2", "--retry-delay", "100ms", NULL};
    it_env *e = *state;
    char log[PATH_MAX], ids[PATH_MAX], handler[512], error[512], seq[32];
    it_proc host, p;
    it_path(log, e, "calls.log");
    start_host(&host, e, "who", log, "reject:second-says-no", flags);
    char *by_second = publish_one(e, "a.txt", "ok");
    char *by_first = publish_one(e, "b.txt", "reject:first-says-no");
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.other", "--ids-file",
                                it_path(ids, e, "c.txt"), "retry", NULL),
                     0);
    char *by_other = published_id(e, "c.txt");
    wait_dlq(e, "who", 3);
    it_finish_hosts(e, "who", &host, 1, it_timeout(60000));

    uint64_t s2 = listed(e, "who", by_second, handler, error, sizeof(handler));
    assert_string_equal(handler, "who/scripted/second");
    assert_string_equal(error, "rejected after 1 deliveries: second-says-no");
    listed(e, "who", by_first, handler, error, sizeof(handler));
    assert_string_equal(handler, "who/scripted/scripted");
    assert_string_equal(error, "rejected after 1 deliveries: first-says-no");
    listed(e, "who", by_other, handler, error, sizeof(handler));
    assert_string_equal(handler, "who/scripted/other");
    assert_non_null(strstr(error, "max-deliver after 2 attempts; last: RETRY"));

    assert_int_equal(run_dlq(&p, e, "who", "list", NULL), 0);
    assert_true(it_file_contains(p.out_path, "who/scripted/second"));
    assert_true(it_file_contains(p.out_path, "who/scripted/scripted"));
    assert_true(it_file_contains(p.out_path, "second-says-no"));
    snprintf(seq, sizeof(seq), "%" PRIu64, s2);
    assert_int_equal(run_dlq(&p, e, "who", "show", seq, NULL), 0);
    assert_true(it_file_contains(p.out_path, "Ibus-Handler: who/scripted/second"));
    assert_true(it_file_contains(p.out_path, "Ibus-Consumer: who"));
    free(by_second);
    free(by_first);
    free(by_other);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(forged_dead_letters_go_nowhere, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(replay_runs_after_a_kill_before_attempts_end, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(republish_by_hand_runs_once, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(replay_runs_once_second_replay_nothing, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(reject_only_that_handler_runs_on_replay, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(purge_only_after_the_ack, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(crashing_handler_dead_lettered_on_each_replay, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(conflict_needs_force, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(filters_show_and_purge, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(invalid_id_rows_show_id_and_type, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(dead_letters_name_their_handler, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
