/* SPDX-License-Identifier: Apache-2.0 */
/* Claims and attempts under crashes, hangs and pauses (issue 43).
 *
 * Point 1: a handler that kills (or hangs) the process must spend the
 * attempts of its own event only. A batch's claims are taken, and their
 * attempts counted, before any handler runs; a crash must not be charged
 * to the healthy events that shared its batch, which would otherwise be
 * dead-lettered as "no handler ran" after --max-deliver restarts without
 * their handler ever running. Each test drives `ibus run` the way a
 * supervisor does (restart after a crash; SIGTERM, then SIGKILL, when
 * /healthz fails) over one backlog.
 *
 * Point 2: a process paused past its leases (SIGSTOP) must not run again
 * the events another process took over meanwhile: at most the calls that
 * were already running when it stopped (--concurrency) may repeat. Two
 * processes share one recorder (a sqlite: file, or a kv: bucket).
 *
 * Every test prints its figures (crashes, dead letters, repeats) so a run
 * shows how far a build is from the bound. */
#include <ctype.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

#define TYPE_SCRIPTED "test.scripted"
#define ID_LEN 32

/* --- helpers ---------------------------------------------------------- */

/* An event id as 32 lowercase hex digits, whatever form it was written
 * in (the ids file, a log line, a header, `ibus markers list`). */
static void norm_id(char out[ID_LEN + 1], const char *id)
{
    size_t n = 0;
    for (; *id != '\0' && n < ID_LEN; id++)
        if (*id != '-')
            out[n++] = (char)tolower((unsigned char)*id);
    out[n] = '\0';
}

/* Index of `id` (any form) in `ids` (normalised), or -1. */
static long id_index(char (*ids)[ID_LEN + 1], size_t n, const char *id)
{
    char want[ID_LEN + 1];
    norm_id(want, id);
    for (size_t i = 0; i < n; i++)
        if (strcmp(ids[i], want) == 0)
            return (long)i;
    return -1;
}

/* Fresh ids, one payload each (payloads[i] for ids[i]), written as the
 * JSON lines `ibus publish` reads; the ids normalised into `norm`. */
static void make_events(it_env *e, const char *jsonl_name, char *const *payloads, size_t n,
                        char (*norm)[ID_LEN + 1])
{
    char ids_path[PATH_MAX], jsonl[PATH_MAX];
    char **ids = NULL;
    assert_true(it_make_ids(&ids, n, it_path(ids_path, e, "ids.txt")));
    assert_true(
        it_write_jsonl_each(it_path(jsonl, e, jsonl_name), ids, payloads, n, TYPE_SCRIPTED));
    for (size_t i = 0; i < n; i++)
        norm_id(norm[i], ids[i]);
    it_lines_free(ids, n);
}

static void publish_events(it_env *e, const char *jsonl_name)
{
    char jsonl[PATH_MAX];
    assert_int_equal(it_publish(NULL, e, it_path(jsonl, e, jsonl_name), NULL), 0);
}

/* Starts `ibus run` for `durable` with the scripted plugin logging to
 * `log`, plus `extra` (NULL-terminated, may be NULL). */
static void start_run(it_proc *p, it_env *e, const char *name, const char *durable, const char *log,
                      const char *const *extra)
{
    char cfg[PATH_MAX + 8];
    it_argv a;
    it_argv_run(&a, e, durable);
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    it_argv_plugin(&a, "scripted", cfg);
    for (; extra != NULL && *extra != NULL; extra++)
        it_argv_add(&a, *extra);
    assert_true(it_spawn(p, e, name, &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
}

static uint64_t dlq_count(it_env *e, const char *durable)
{
    char dlq[128];
    snprintf(dlq, sizeof(dlq), "DLQ_%s", durable);
    return it_stream_count(&e->server, dlq);
}

static size_t dlq_read(it_msg **out, it_env *e, const char *durable)
{
    char dlq[128];
    snprintf(dlq, sizeof(dlq), "DLQ_%s", durable);
    return it_stream_read_all(out, &e->server, dlq);
}

/* True once nothing is pending or awaiting an ack (one reading). */
static bool consumer_drained(it_env *e, const char *durable)
{
    it_consumer_state st;
    return it_consumer_get(&st, &e->server, IT_STREAM, durable) && st.pending == 0 &&
           st.ack_pending == 0;
}

/* Adds, per id, the calls of `consumer` with verdict `verdict` (NULL:
 * any) in the scripted log `log` to counts[]. */
static void count_calls(size_t *counts, char (*ids)[ID_LEN + 1], size_t n, const char *log,
                        const char *consumer, const char *verdict)
{
    char **lines = NULL, field[256];
    size_t nl = it_file_read_lines(&lines, log);
    for (size_t i = 0; i < nl; i++) {
        if (!it_field(field, sizeof(field), lines[i], 0) || strcmp(field, consumer) != 0)
            continue;
        if (verdict != NULL &&
            (!it_field(field, sizeof(field), lines[i], 4) || strcmp(field, verdict) != 0))
            continue;
        if (!it_field(field, sizeof(field), lines[i], 1))
            continue;
        long k = id_index(ids, n, field);
        if (k >= 0)
            counts[k]++;
    }
    it_lines_free(lines, nl);
}

/* Sets marked[i] for every ids[i] `consumer` has a marker of, read with
 * one `ibus markers list` on `recorder` (a URI; kv: goes through the
 * test server's connection flags). Returns how many are marked. */
static size_t read_marked(bool *marked, it_env *e, const char *recorder, const char *consumer,
                          char (*ids)[ID_LEN + 1], size_t n)
{
    it_argv a;
    it_proc p;
    char **lines = NULL, field[256];
    size_t count = 0;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", NULL);
    if (strncmp(recorder, "kv:", 3) == 0)
        it_argv_connect(&a, &e->server);
    it_argv_addf(&a, "--recorder=%s", recorder);
    it_argv_addl(&a, "--consumer", consumer, "--limit", "0", "list", NULL);
    /* 2: the identity has no markers at all (none of them is marked) */
    int st = it_proc_run(&p, e->dir, "markers", NULL, a.v, it_timeout(60000));
    it_argv_free(&a);
    if (st != 0 && !(st == 2 && it_file_contains(p.err_path, "has no markers of that identity")))
        fail_msg("ibus markers list on %s ended with status %d", recorder, st);
    memset(marked, 0, n * sizeof(*marked));
    size_t nl = it_file_read_lines(&lines, p.out_path);
    for (size_t i = 0; i < nl; i++) {
        /* "<time> <consumer> <event id>" */
        if (!it_field(field, sizeof(field), lines[i], 2))
            continue;
        long k = id_index(ids, n, field);
        if (k >= 0 && !marked[k]) {
            marked[k] = true;
            count++;
        }
    }
    it_lines_free(lines, nl);
    return count;
}

static void sqlite_uri(char *out, size_t cap, it_env *e)
{
    char db[PATH_MAX];
    snprintf(out, cap, "sqlite:%s", it_path(db, e, "markers.db"));
}

/* What the dead-letter stream says about a backlog with one bad event
 * (ids[bad]): dead letters of healthy ids, of healthy ids whose handler
 * had already returned OK, of the bad one, and whether the bad one's
 * Ibus-Error blames attempts used up on earlier deliveries. */
typedef struct dl_tally {
    size_t total, healthy, healthy_succeeded, bad;
    bool bad_reason_exhausted;
    char bad_reason[512];
} dl_tally;

static void tally_dead_letters(dl_tally *t, it_env *e, const char *durable, char (*ids)[ID_LEN + 1],
                               size_t n, size_t bad, const size_t *ok_calls)
{
    it_msg *dl = NULL;
    memset(t, 0, sizeof(*t));
    t->total = dlq_read(&dl, e, durable);
    for (size_t i = 0; i < t->total; i++) {
        const char *id = it_msg_header(&dl[i], "Ibus-Event-Id");
        const char *why = it_msg_header(&dl[i], "Ibus-Error");
        long k = id != NULL ? id_index(ids, n, id) : -1;
        if (k < 0)
            continue;
        if ((size_t)k == bad) {
            t->bad++;
            snprintf(t->bad_reason, sizeof(t->bad_reason), "%s", why != NULL ? why : "(none)");
            t->bad_reason_exhausted = why != NULL && (strstr(why, "no handler ran") != NULL ||
                                                      strstr(why, "used up before it") != NULL);
            continue;
        }
        t->healthy++;
        if (ok_calls[k] > 0)
            t->healthy_succeeded++;
        if (t->healthy <= 3)
            printf("  healthy id %s dead-lettered: %s: %s\n", ids[k],
                   it_msg_header(&dl[i], "Ibus-Reason"), why != NULL ? why : "(none)");
    }
    it_msgs_free(dl, t->total);
}

/* --- point 1: one crashing event in a backlog ------------------------- */

#define CRASH_EVENTS 32
#define CRASH_BAD 1 /* one healthy event before it, 30 after */
#define CRASH_MAX_DELIVER 3
#define CRASH_MAX_STARTS 8

/* 32 events published before the first start (one backlog): one healthy,
 * one whose handler aborts the process, 30 healthy. `ibus run` with
 * --max-deliver 3 at the given --batch and --concurrency, restarted after
 * each crash until the crashing event is dead-lettered and the consumer
 * is idle. The crashing event must be dead-lettered alone, for its own
 * attempts; every healthy event handled and marked, none dead-lettered.
 * Crashes: at most --max-deliver + 1 (the first crash of a batch cannot
 * be pinned on one event, so it is charged to none; from then on the
 * batch's claims run one at a time, each attempt counted before it). */
static void crash_in_backlog(it_env *e, int batch, int concurrency)
{
    const char *durable = "crash", *consumer = "crash/scripted/scripted";
    char log[PATH_MAX], batch_s[16], conc_s[16], uri[PATH_MAX + 16];
    char *payloads[CRASH_EVENTS];
    char ids[CRASH_EVENTS][ID_LEN + 1];
    size_t ok_calls[CRASH_EVENTS] = {0};
    bool marked[CRASH_EVENTS];
    it_proc host;
    int crashes = 0, starts = 0;

    snprintf(batch_s, sizeof(batch_s), "%d", batch);
    snprintf(conc_s, sizeof(conc_s), "%d", concurrency);
    const char *extra[] = {"--max-deliver",
                           "3",
                           "--batch",
                           batch_s,
                           "--concurrency",
                           conc_s,
                           "--ack-wait",
                           "2s",
                           "--retry-delay",
                           "100ms",
                           "--drain-timeout",
                           "5s",
                           NULL};
    for (size_t i = 0; i < CRASH_EVENTS; i++)
        payloads[i] = i == CRASH_BAD ? "crash" : "ok";
    make_events(e, "events.jsonl", payloads, CRASH_EVENTS, ids);
    it_path(log, e, "calls.log");
    assert_true(it_stream_add(&e->server, IT_STREAM, IT_SUBJECTS, 0));
    publish_events(e, "events.jsonl");

    int64_t started = it_now_ms(), deadline = started + it_timeout(90000);
    start_run(&host, e, "host", durable, log, extra);
    starts++;
    bool done = false, capped = false;
    while (!done && !capped) {
        if (!it_proc_running(&host)) {
            if (host.status != -SIGABRT)
                fail_msg("ibus run ended with status %d, not by the handler's abort()",
                         host.status);
            crashes++;
            capped = starts >= CRASH_MAX_STARTS;
            if (!capped) {
                start_run(&host, e, "host", durable, log, extra);
                starts++;
            }
            continue;
        }
        done = dlq_count(e, durable) >= 1 && consumer_drained(e, durable);
        capped = it_now_ms() > deadline;
        it_sleep_ms(50);
    }
    if (it_proc_running(&host))
        it_finish_hosts(e, durable, &host, 1, it_timeout(60000));

    count_calls(ok_calls, ids, CRASH_EVENTS, log, consumer, "ok");
    sqlite_uri(uri, sizeof(uri), e);
    size_t nmarked = read_marked(marked, e, uri, consumer, ids, CRASH_EVENTS);
    dl_tally t;
    tally_dead_letters(&t, e, durable, ids, CRASH_EVENTS, CRASH_BAD, ok_calls);
    size_t healthy_marked = nmarked - (marked[CRASH_BAD] ? 1 : 0), never_ran = 0;
    for (size_t i = 0; i < CRASH_EVENTS; i++)
        never_ran += i != CRASH_BAD && ok_calls[i] == 0;
    printf("crash in backlog, batch %d, concurrency %d: crashes=%d starts=%d dead letters=%zu "
           "(crashing event %zu, healthy %zu) healthy marked=%zu/%d healthy never run=%zu "
           "%.1f s\n",
           batch, concurrency, crashes, starts, t.total, t.bad, t.healthy, healthy_marked,
           CRASH_EVENTS - 1, never_ran, (double)(it_now_ms() - started) / 1000.0);
    if (t.bad > 0)
        printf("  crashing event's reason: %s\n", t.bad_reason);

    if (capped)
        fail_msg("not settled after %d starts (%s)", starts,
                 starts >= CRASH_MAX_STARTS ? "restart cap" : "time cap");
    assert_int_equal(t.healthy, 0);
    assert_int_equal(t.bad, 1);
    assert_int_equal(t.total, 1);
    if (t.bad_reason_exhausted)
        fail_msg("the crashing event's dead letter blames attempts used on earlier "
                 "deliveries, not its own crashes: %s",
                 t.bad_reason);
    assert_int_equal(healthy_marked, CRASH_EVENTS - 1);
    assert_int_equal(never_ran, 0);
    assert_true(crashes <= CRASH_MAX_DELIVER + 1);
    it_done(e);
}

static void crash_batch1_conc1(void **state)
{
    crash_in_backlog(*state, 1, 1);
}

static void crash_batch1_conc8(void **state)
{
    crash_in_backlog(*state, 1, 8);
}

static void crash_batch64_conc1(void **state)
{
    crash_in_backlog(*state, 64, 1);
}

static void crash_batch64_conc8(void **state)
{
    crash_in_backlog(*state, 64, 8);
}

static void crash_batch256_conc1(void **state)
{
    crash_in_backlog(*state, 256, 1);
}

static void crash_batch256_conc8(void **state)
{
    crash_in_backlog(*state, 256, 8);
}

/* --- point 1: one hanging event in a backlog -------------------------- */

#define HANG_EVENTS 21
#define HANG_BAD 5 /* five healthy events before it, fifteen after */
#define HANG_MAX_STARTS 8

/* The supervisor's move on a stuck process: SIGTERM, then SIGKILL when it
 * has not exited within 5 s. Returns 1 when SIGKILL was needed. */
static int stop_stuck(it_proc *host)
{
    int st = it_proc_stop(host, SIGTERM, 5000);
    return st == -SIGKILL ? 1 : 0;
}

/* 21 events (one backlog) whose sixth hangs for ever, --handler-timeout
 * 1s, --max-deliver 3. A supervisor loop polls /healthz and, once it
 * fails, stops the process (SIGTERM, SIGKILL after 5 s) and starts a new
 * one, until the hanging event is dead-lettered and the consumer idle.
 * No healthy event may be dead-lettered (neither one that never ran nor
 * one that had succeeded); every one is marked. Events run twice are
 * counted and printed. */
static void hang_in_backlog(void **state)
{
    it_env *e = *state;
    const char *durable = "hang", *consumer = "hang/scripted/scripted";
    char log[PATH_MAX], http[64], uri[PATH_MAX + 16];
    char *payloads[HANG_EVENTS];
    char ids[HANG_EVENTS][ID_LEN + 1];
    size_t ok_calls[HANG_EVENTS] = {0};
    bool marked[HANG_EVENTS];
    it_proc host;
    int port = it_free_port(), starts = 0, stops = 0, kills = 0;

    snprintf(http, sizeof(http), "127.0.0.1:%d", port);
    const char *extra[] = {"--max-deliver",
                           "3",
                           "--ack-wait",
                           "2s",
                           "--retry-delay",
                           "100ms",
                           "--handler-timeout",
                           "1s",
                           "--drain-timeout",
                           "2s",
                           "--http",
                           http,
                           NULL};
    for (size_t i = 0; i < HANG_EVENTS; i++)
        payloads[i] = i == HANG_BAD ? "hang:99" : "ok";
    make_events(e, "events.jsonl", payloads, HANG_EVENTS, ids);
    it_path(log, e, "calls.log");
    assert_true(it_stream_add(&e->server, IT_STREAM, IT_SUBJECTS, 0));
    publish_events(e, "events.jsonl");

    int64_t started = it_now_ms(), deadline = started + it_timeout(120000);
    start_run(&host, e, "host", durable, log, extra);
    starts++;
    bool answered = false, done = false, capped = false;
    while (!done && !capped) {
        if (!it_proc_running(&host))
            fail_msg("ibus run ended on its own with status %d", host.status);
        int code = it_http_get(NULL, e, port, "/healthz");
        answered = answered || code == 200;
        /* before its first answer the process is still starting */
        if (code != 200 && (code != 0 || answered)) {
            kills += stop_stuck(&host);
            stops++;
            capped = starts >= HANG_MAX_STARTS;
            if (!capped) {
                start_run(&host, e, "host", durable, log, extra);
                starts++;
                answered = false;
            }
            continue;
        }
        done = dlq_count(e, durable) >= 1 && consumer_drained(e, durable);
        capped = it_now_ms() > deadline;
        it_sleep_ms(200);
    }
    if (it_proc_running(&host))
        it_finish_hosts(e, durable, &host, 1, it_timeout(60000));

    count_calls(ok_calls, ids, HANG_EVENTS, log, consumer, "ok");
    sqlite_uri(uri, sizeof(uri), e);
    size_t nmarked = read_marked(marked, e, uri, consumer, ids, HANG_EVENTS);
    dl_tally t;
    tally_dead_letters(&t, e, durable, ids, HANG_EVENTS, HANG_BAD, ok_calls);
    size_t healthy_marked = nmarked - (marked[HANG_BAD] ? 1 : 0), twice = 0, never_ran = 0;
    for (size_t i = 0; i < HANG_EVENTS; i++) {
        twice += i != HANG_BAD && ok_calls[i] > 1;
        never_ran += i != HANG_BAD && ok_calls[i] == 0;
    }
    printf("hang in backlog: stops=%d (SIGKILL needed %d) starts=%d dead letters=%zu (hanging "
           "event %zu, healthy %zu of which %zu had succeeded) healthy marked=%zu/%d healthy "
           "run twice or more=%zu never run=%zu %.1f s\n",
           stops, kills, starts, t.total, t.bad, t.healthy, t.healthy_succeeded, healthy_marked,
           HANG_EVENTS - 1, twice, never_ran, (double)(it_now_ms() - started) / 1000.0);
    if (t.bad > 0)
        printf("  hanging event's reason: %s\n", t.bad_reason);

    if (capped)
        fail_msg("not settled after %d starts (%s)", starts,
                 starts >= HANG_MAX_STARTS ? "restart cap" : "time cap");
    assert_int_equal(t.healthy_succeeded, 0);
    assert_int_equal(t.healthy, 0);
    assert_int_equal(t.bad, 1);
    assert_int_equal(healthy_marked, HANG_EVENTS - 1);
    assert_int_equal(never_ran, 0);
    it_done(e);
}

/* --- point 2: a process paused past its leases ------------------------ */

#define PAUSE_EVENTS 300
#define PAUSE_MS 10000 /* more than 2 x --ack-wait: the leases have ended */

/* Two `ibus run` (--concurrency 1, --ack-wait 3s) share `recorder` and
 * one durable; a backlog of events whose handler sleeps 20 ms. Process A
 * is stopped with SIGSTOP once it is busy, for 10 s, then continued; B
 * takes A's claims over meanwhile. Per handler and id, the calls that
 * returned OK, over both processes' logs: one call in all may repeat
 * (the one A was in when it stopped), whichever handler it was. None
 * lost (every id marked), none dead-lettered. */
static void pause_past_lease(it_env *e, const char *recorder)
{
    const char *durable = "pause", *consumer = "pause/scripted/scripted";
    char log_a[PATH_MAX], log_b[PATH_MAX], rec_flag[PATH_MAX + 16];
    char *payloads[PAUSE_EVENTS];
    char ids[PAUSE_EVENTS][ID_LEN + 1];
    size_t calls_a[PAUSE_EVENTS] = {0}, calls_b[PAUSE_EVENTS] = {0};
    size_t second_a[PAUSE_EVENTS] = {0}, second_b[PAUSE_EVENTS] = {0};
    bool marked[PAUSE_EVENTS];
    it_proc hosts[2];

    snprintf(rec_flag, sizeof(rec_flag), "--recorder=%s", recorder);
    const char *extra[] = {"--concurrency", "1",     "--ack-wait", "3s",
                           "--retry-delay", "100ms", rec_flag,     NULL};
    for (size_t i = 0; i < PAUSE_EVENTS; i++)
        payloads[i] = "sleep:20";
    make_events(e, "events.jsonl", payloads, PAUSE_EVENTS, ids);
    it_path(log_a, e, "calls-a.log");
    it_path(log_b, e, "calls-b.log");

    int64_t started = it_now_ms();
    start_run(&hosts[0], e, "hostA", durable, log_a, extra);
    start_run(&hosts[1], e, "hostB", durable, log_b, extra);
    publish_events(e, "events.jsonl");
    /* A is busy: ten events (two handlers each) done, more claimed */
    assert_true(it_wait_lines(log_a, 20, it_timeout(30000)) >= 20);
    assert_true(it_proc_signal(&hosts[0], SIGSTOP));
    size_t a_at_stop = it_file_lines(log_a);
    it_sleep_ms(PAUSE_MS);
    size_t b_during = it_file_lines(log_b);
    assert_true(it_proc_signal(&hosts[0], SIGCONT));
    it_finish_hosts(e, durable, hosts, 2, it_timeout(120000));

    count_calls(calls_a, ids, PAUSE_EVENTS, log_a, consumer, "ok");
    count_calls(calls_b, ids, PAUSE_EVENTS, log_b, consumer, "ok");
    count_calls(second_a, ids, PAUSE_EVENTS, log_a, "pause/scripted/second", "ok");
    count_calls(second_b, ids, PAUSE_EVENTS, log_b, "pause/scripted/second", "ok");
    /* repeats: OK calls beyond the first per (handler, id) */
    size_t repeated = 0, second_repeated = 0, both = 0, never = 0, handled_a = 0;
    for (size_t i = 0; i < PAUSE_EVENTS; i++) {
        size_t n = calls_a[i] + calls_b[i], n2 = second_a[i] + second_b[i];
        repeated += n > 1 ? n - 1 : 0;
        second_repeated += n2 > 1 ? n2 - 1 : 0;
        both += calls_a[i] > 0 && calls_b[i] > 0;
        never += n == 0;
        handled_a += calls_a[i] > 0;
    }
    size_t nmarked = read_marked(marked, e, recorder, consumer, ids, PAUSE_EVENTS);
    uint64_t dead = dlq_count(e, durable);
    printf("SIGSTOP %d ms past the lease (%.*s): A had %zu log lines at the stop, B %zu by "
           "SIGCONT; ids run by A=%zu, by both=%zu; handler calls repeated (OK again): "
           "scripted %zu, second %zu; never run=%zu marked=%zu/%d dead-lettered=%llu "
           "%.1f s\n",
           PAUSE_MS, (int)strcspn(recorder, ":"), recorder, a_at_stop, b_during, handled_a, both,
           repeated, second_repeated, never, nmarked, PAUSE_EVENTS, (unsigned long long)dead,
           (double)(it_now_ms() - started) / 1000.0);

    assert_int_equal(never, 0);
    assert_int_equal(nmarked, PAUSE_EVENTS);
    assert_int_equal(dead, 0);
    /* --concurrency 1: only the one call A was running when it stopped,
     * of either handler */
    assert_true(repeated + second_repeated <= 1);
    it_done(e);
}

static void pause_past_lease_sqlite(void **state)
{
    it_env *e = *state;
    char uri[PATH_MAX + 16];
    sqlite_uri(uri, sizeof(uri), e);
    pause_past_lease(e, uri);
}

static void pause_past_lease_kv(void **state)
{
    /* the hosts' --create makes the bucket */
    pause_past_lease(*state, "kv:pause-markers");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(crash_batch1_conc1, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(crash_batch1_conc8, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(crash_batch64_conc1, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(crash_batch64_conc8, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(crash_batch256_conc1, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(crash_batch256_conc8, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(hang_in_backlog, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(pause_past_lease_sqlite, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(pause_past_lease_kv, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
