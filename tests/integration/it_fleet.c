/* SPDX-License-Identifier: Apache-2.0 */
/* Several hosts and failures: three processes on one durable and one
 * SQLite file with concurrent duplicates, kill -9 mid-stream, a nats-server
 * restart mid-stream, and SIGTERM with nothing handled left unacked. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_cluster.h"
#include "it_support.h"

static void start_host(it_proc *host, it_env *e, const char *name, const char *durable,
                       const char *plugin, const char *config, const char *const *extra)
{
    it_argv a;
    it_argv_run(&a, e, durable);
    it_argv_plugin(&a, plugin, config);
    for (; extra != NULL && *extra != NULL; extra++)
        it_argv_add(&a, *extra);
    assert_true(it_spawn(host, e, name, &a));
    it_argv_free(&a);
}

/* Writes events.jsonl with every id of `ids` twice in a row (a producer's
 * retry landing next to its original), as test.scripted events running
 * `script`; `jsonl` receives the file's path. */
static void write_each_twice(char jsonl[PATH_MAX], it_env *e, char **ids, size_t n,
                             const char *script)
{
    char **twice = calloc(2 * n, sizeof(char *));
    assert_non_null(twice);
    for (size_t i = 0; i < n; i++)
        twice[2 * i] = twice[2 * i + 1] = ids[i];
    assert_true(
        it_write_jsonl(it_path(jsonl, e, "events.jsonl"), twice, 2 * n, "test.scripted", script));
    free(twice);
}

static void three_hosts_concurrent_duplicates(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], ids_path[PATH_MAX], main_jsonl[PATH_MAX], dup_jsonl[PATH_MAX];
    char cfg[PATH_MAX + 8];
    char **ids = NULL;
    const size_t n = (size_t)it_scaled(10000, 2000);
    const size_t ndup = n / 10;
    it_proc hosts[3], pub[2];
    const char *extra[] = {"--retry-delay", "200ms", "--retry-max-delay", "1s", NULL};

    it_path(audit, e, "audit.log");
    snprintf(cfg, sizeof(cfg), "file=%s", audit);
    assert_true(it_make_ids(&ids, n, it_path(ids_path, e, "ids.txt")));
    /* Publisher A sends every event; publisher B at the same time sends
     * every tenth again, in the same order, so a duplicate often reaches
     * another host while the original is being handled. */
    char **dups = calloc(ndup, sizeof(char *));
    assert_non_null(dups);
    for (size_t i = 0; i < ndup; i++)
        dups[i] = ids[i * 10];
    assert_true(it_write_jsonl(it_path(main_jsonl, e, "main.jsonl"), ids, n, "order.created", "x"));
    assert_true(
        it_write_jsonl(it_path(dup_jsonl, e, "dups.jsonl"), dups, ndup, "order.created", "x"));
    free(dups);

    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof(name), "host%d", i + 1);
        start_host(&hosts[i], e, name, "fleet", "audit", cfg, extra);
    }
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "fleet", it_timeout(30000)));
    int64_t t0 = it_now_ms();
    assert_true(it_publish_start(&pub[0], e, "publish-a", main_jsonl, NULL));
    assert_true(it_publish_start(&pub[1], e, "publish-b", dup_jsonl, NULL));
    it_published pa, pb;
    assert_int_equal(it_proc_wait(&pub[0], it_timeout(180000)), 0);
    assert_int_equal(it_proc_wait(&pub[1], it_timeout(180000)), 0);
    assert_true(it_published_read(&pa, &pub[0]));
    assert_true(it_published_read(&pb, &pub[1]));
    assert_int_equal(pa.published, n);
    assert_int_equal(pb.published, ndup);

    assert_int_equal(it_wait_lines(audit, n, it_timeout(240000)), n);
    it_finish_hosts(e, "fleet", hosts, 3, it_timeout(120000));
    printf("%zu events + %zu duplicates through 3 hosts in %lld ms\n", n, ndup,
           (long long)(it_now_ms() - t0));

    it_tally t;
    assert_true(it_tally_file(&t, audit, ids_path, "fleet/audit/audit", NULL, 20));
    assert_int_equal(t.expected, n);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.unexpected, 0);
    assert_int_equal(t.repeated, 0);
    assert_int_equal(t.lines, n);

    it_summary sum;
    assert_true(it_summary_read(&sum, it_path(audit, e, "summary.jsonl")));
    printf("hosts: received=%ld handled=%ld duplicates=%ld busy=%ld naked=%ld acked=%ld\n",
           sum.received, sum.handled, sum.duplicates, sum.busy, sum.naked, sum.acked);
    assert_int_equal(sum.lines, 3);
    assert_int_equal(sum.worst_exit, 0);
    assert_int_equal(sum.handled, n);
    assert_int_equal(sum.duplicates, ndup);
    assert_int_equal(sum.acked, n + ndup);
    assert_int_equal(sum.dead_lettered, 0);
    it_lines_free(ids, n);
    it_done(e);
}

/* kill -9 in the middle of a slow stream, then a restart: nothing is lost,
 * and only the handler running at the kill, plus one whose mark was being
 * committed, run again: with 10 ms handlers and the default 2 ms commit
 * window every finished handler's mark commits before the next starts
 * (the crash window's bound of docs/design.md, C + ceil(C*I/t) = 1 + 1). Before the committer, a
 * kill repeated up to a whole batch of 16. */
static void kill9_midstream(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids_path[PATH_MAX], jsonl[PATH_MAX], cfg[PATH_MAX + 8];
    char **ids = NULL;
    const size_t n = (size_t)it_scaled(400, 200);
    const int batch = 16;
    const char *extra[] = {"--batch",           "16", "--ack-wait", "2s", "--retry-delay", "200ms",
                           "--retry-max-delay", "1s", NULL};
    it_proc host;

    it_path(log, e, "calls.log");
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    assert_true(it_make_ids(&ids, n, it_path(ids_path, e, "ids.txt")));
    assert_true(
        it_write_jsonl(it_path(jsonl, e, "events.jsonl"), ids, n, "test.scripted", "sleep:10"));

    start_host(&host, e, "host", "k9", "scripted", cfg, extra);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "k9", it_timeout(30000)));
    assert_int_equal(it_publish(NULL, e, jsonl, NULL), 0);

    /* two lines per event (handlers scripted and second) */
    assert_true(it_wait_lines(log, n / 2, it_timeout(120000)) >= n / 2);
    assert_true(it_proc_signal(&host, SIGKILL));
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), -SIGKILL);
    size_t at_kill = it_file_lines(log);
    assert_true(at_kill < 2 * n); /* it really was mid-stream */

    start_host(&host, e, "host", "k9", "scripted", cfg, extra);
    assert_true(it_wait_lines(log, 2 * n, it_timeout(120000)) >= 2 * n);
    it_finish_hosts(e, "k9", &host, 1, it_timeout(120000));

    it_tally t;
    assert_true(it_tally_file(&t, log, ids_path, "k9/scripted/scripted", "ok", 2 * (size_t)batch));
    printf("kill -9 after %zu handler lines; repeats: %zu events ran twice (%zu extra runs), "
           "batch %d\n",
           at_kill, t.repeated, t.extra, batch);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.unexpected, 0);
    it_tally t2;
    assert_true(it_tally_file(&t2, log, ids_path, "k9/scripted/second", "ok", 0));
    assert_int_equal(t2.missing, 0);
    printf("extra runs: scripted %zu, second %zu (bound 2 in all)\n", t.extra, t2.extra);
    assert_true(t.extra + t2.extra <= 2);
    it_lines_free(ids, n);
    it_done(e);
}

static void server_restart_midstream(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], ids1[PATH_MAX], ids2[PATH_MAX], all_ids[PATH_MAX], cfg[PATH_MAX + 8];
    char count1[24], count2[24];
    const long n1 = it_scaled(3000, 1000), n2 = it_scaled(1000, 400);
    it_proc hosts[2];

    it_path(audit, e, "audit.log");
    snprintf(cfg, sizeof(cfg), "file=%s", audit);
    snprintf(count1, sizeof(count1), "%ld", n1);
    snprintf(count2, sizeof(count2), "%ld", n2);
    /* A short AckWait: deliveries whose acks die with the old server come
     * back sooner (and are dropped as duplicates). */
    const char *extra[] = {"--ack-wait", "5s", NULL};
    start_host(&hosts[0], e, "host1", "restart", "audit", cfg, extra);
    start_host(&hosts[1], e, "host2", "restart", "audit", cfg, extra);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "restart", it_timeout(30000)));
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.created", "--count", count1,
                                "--ids-file", it_path(ids1, e, "ids1.txt"), NULL),
                     0);
    assert_true(it_wait_lines(audit, (size_t)n1 / 4, it_timeout(120000)) >= (size_t)n1 / 4);
    size_t before = it_file_lines(audit);
    assert_true(it_server_restart(&e->server));
    printf("nats-server restarted after %zu of %ld events\n", before, n1);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "restart", it_timeout(30000)));
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.created", "--count", count2,
                                "--ids-file", it_path(ids2, e, "ids2.txt"), NULL),
                     0);
    assert_int_equal(it_wait_lines(audit, (size_t)(n1 + n2), it_timeout(180000)), n1 + n2);
    it_finish_hosts(e, "restart", hosts, 2, it_timeout(120000));

    /* both id lists together */
    char *a = it_file_read(NULL, ids1), *b = it_file_read(NULL, ids2);
    assert_non_null(a);
    assert_non_null(b);
    size_t la = strlen(a), lb = strlen(b);
    char *both = malloc(la + lb + 1);
    assert_non_null(both);
    memcpy(both, a, la);
    memcpy(both + la, b, lb + 1);
    assert_true(it_file_write(it_path(all_ids, e, "ids.txt"), both, la + lb));
    free(a);
    free(b);
    free(both);

    it_summary sum;
    char sp[PATH_MAX];
    assert_true(it_summary_read(&sum, it_path(sp, e, "summary.jsonl")));
    printf("hosts: received=%ld handled=%ld duplicates=%ld acked=%ld\n", sum.received, sum.handled,
           sum.duplicates, sum.acked);
    assert_int_equal(sum.handled, n1 + n2);
    assert_int_equal(sum.worst_exit, 0);

    it_tally t;
    assert_true(it_tally_file(&t, audit, all_ids, "restart/audit/audit", NULL, 20));
    assert_int_equal(t.expected, n1 + n2);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    assert_int_equal(t.unexpected, 0);
    it_done(e);
}

/* JSON log lines report hand-backs as "count":N. */
static long handed_back(const char *err_log)
{
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, err_log);
    long total = 0;
    for (size_t i = 0; i < n; i++) {
        if (strstr(lines[i], "handed back undelivered messages") == NULL)
            continue;
        const char *c = strstr(lines[i], "\"count\":");
        if (c != NULL)
            total += atol(c + strlen("\"count\":"));
    }
    it_lines_free(lines, n);
    return total;
}

static void sigterm_drains(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids_path[PATH_MAX], jsonl[PATH_MAX], cfg[PATH_MAX + 8];
    char summary2[PATH_MAX];
    char **ids = NULL;
    const size_t n = 120;
    const char *extra[] = {"--batch", "8", NULL};
    it_proc host;

    it_path(log, e, "calls.log");
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    assert_true(it_make_ids(&ids, n, it_path(ids_path, e, "ids.txt")));
    assert_true(
        it_write_jsonl(it_path(jsonl, e, "events.jsonl"), ids, n, "test.scripted", "sleep:50"));

    start_host(&host, e, "host", "term", "scripted", cfg, extra);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "term", it_timeout(30000)));
    assert_int_equal(it_publish(NULL, e, jsonl, NULL), 0);
    assert_true(it_wait_lines(log, 40, it_timeout(60000)) >= 40);
    assert_true(it_proc_signal(&host, SIGTERM));
    assert_int_equal(it_proc_wait(&host, it_timeout(60000)), 0);
    size_t first_run = it_file_lines(log);
    assert_true(first_run < 2 * n);

    /* Everything handled was acked: only what was handed back (nak'ed
     * without running) may still await an ack. */
    long back = handed_back(host.err_path);
    it_consumer_state cs;
    assert_true(it_consumer_get(&cs, &e->server, IT_STREAM, "term"));
    printf("after SIGTERM: %zu handler lines, handed back %ld, ack_pending %llu, pending %llu\n",
           first_run, back, (unsigned long long)cs.ack_pending, (unsigned long long)cs.pending);
    assert_true(cs.ack_pending <= (unsigned long long)back);

    /* A new process on the same durable: no handled id comes back. */
    it_summary s1, s2;
    assert_true(it_summary_read(&s1, it_path(summary2, e, "summary.jsonl")));
    assert_int_equal(s1.worst_exit, 0);
    char flag[PATH_MAX + 32];
    snprintf(flag, sizeof(flag), "--summary-file=%s", it_path(summary2, e, "summary2.jsonl"));
    const char *extra2[] = {"--batch", "8", flag, NULL};
    start_host(&host, e, "host", "term", "scripted", cfg, extra2);
    assert_true(it_wait_lines(log, 2 * n, it_timeout(120000)) >= 2 * n);
    it_finish_hosts(e, "term", &host, 1, it_timeout(60000));
    assert_true(it_summary_read(&s2, summary2));
    assert_int_equal(s2.duplicates, 0);
    assert_int_equal(s1.handled + s2.handled, 2 * (long)n);

    it_tally t;
    assert_true(it_tally_file(&t, log, ids_path, "term/scripted/scripted", "ok", 10));
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    assert_int_equal(t.lines, n);
    it_lines_free(ids, n);
    it_done(e);
}

/* The claim race: every event published twice back to back, two hosts
 * pulling one message at a time, and a handler slow enough that the second
 * copy reaches the other host while the first still runs. The other host's
 * claim must come back busy (the copy is nak'ed, never acked as done while
 * the first may still fail) and the handler must run once per event. */
static void concurrent_copies_claimed_once(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids_path[PATH_MAX], jsonl[PATH_MAX], cfg[PATH_MAX + 8];
    char **ids = NULL;
    const size_t n = (size_t)it_scaled(200, 100);
    const char *extra[] = {"--batch", "1", "--retry-delay", "100ms", "--retry-max-delay",
                           "500ms",   NULL};
    it_proc hosts[2];

    it_path(log, e, "calls.log");
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    assert_true(it_make_ids(&ids, n, it_path(ids_path, e, "ids.txt")));
    write_each_twice(jsonl, e, ids, n, "sleep:30");

    start_host(&hosts[0], e, "host1", "race", "scripted", cfg, extra);
    start_host(&hosts[1], e, "host2", "race", "scripted", cfg, extra);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "race", it_timeout(30000)));
    assert_int_equal(it_publish(NULL, e, jsonl, NULL), 0);
    /* two handlers (scripted, second) per event */
    assert_true(it_wait_lines(log, 2 * n, it_timeout(120000)) >= 2 * n);
    it_finish_hosts(e, "race", hosts, 2, it_timeout(120000));

    it_tally t;
    assert_true(it_tally_file(&t, log, ids_path, "race/scripted/scripted", "ok", 10));
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    it_summary sum;
    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    printf("claim race: %zu events twice over 2 hosts: handled=%ld duplicates=%ld busy=%ld "
           "naked=%ld\n",
           n, sum.handled, sum.duplicates, sum.busy, sum.naked);
    assert_int_equal(sum.handled, 2 * n); /* two handlers per event, once each */
    /* The second copy of each, eventually; on a loaded machine a copy may
     * also be redelivered once more (an ack that came after its deadline),
     * and dropping it is right, so this is a lower bound. */
    assert_true(sum.duplicates >= (long)(2 * n));
    assert_true(sum.busy > 0); /* the race really happened */
    it_lines_free(ids, n);
    it_done(e);
}

/* Two hosts share a kv: recorder that lives on their own NATS connection
 * (no url= in the URI): the bucket is created by the first, bound by the
 * second, and every event, published twice, runs each handler once. */
static void kv_recorder_shared_by_hosts(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids_path[PATH_MAX], jsonl[PATH_MAX], cfg[PATH_MAX + 8];
    char **ids = NULL;
    const size_t n = (size_t)it_scaled(300, 100);
    /* no create=1: the hosts' --create creates the bucket */
    const char *extra[] = {"--recorder", "kv:fleet-markers", "--retry-delay", "100ms", NULL};
    it_proc hosts[2];

    it_path(log, e, "calls.log");
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    assert_true(it_make_ids(&ids, n, it_path(ids_path, e, "ids.txt")));
    write_each_twice(jsonl, e, ids, n, "sleep:1");

    start_host(&hosts[0], e, "host1", "kvf", "scripted", cfg, extra);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "kvf", it_timeout(30000)));
    start_host(&hosts[1], e, "host2", "kvf", "scripted", cfg, extra);
    assert_int_equal(it_publish(NULL, e, jsonl, NULL), 0);
    /* two handlers (scripted, second) per event */
    assert_true(it_wait_lines(log, 2 * n, it_timeout(120000)) >= 2 * n);
    it_finish_hosts(e, "kvf", hosts, 2, it_timeout(120000));

    it_tally t;
    assert_true(it_tally_file(&t, log, ids_path, "kvf/scripted/scripted", "ok", 0));
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    assert_int_equal(t.unexpected, 0);
    it_summary sum;
    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    printf("kv: recorder, 2 hosts, %zu events twice: handled=%ld duplicates=%ld\n", n, sum.handled,
           sum.duplicates);
    assert_int_equal(sum.handled, 2 * n);
    assert_true(sum.duplicates >= (long)(2 * n));
    it_lines_free(ids, n);
    it_done(e);
}

/* A handler that runs longer than the bucket's TTL (issue 23): kv: with a
 * 6 s TTL, one event whose handler sleeps 15 s, --ack-wait 2s (the lease,
 * renewed every second, so the TTL removes the claim's first epochs while
 * it runs). 9 s in, a second process joins the same durable and a copy of
 * the event arrives: it must find the claim held, and the event must run
 * once. On 1 replica (the stream's server) or 3 (a 3-node cluster of its
 * own, through url=). --max-deliver 2 and --retry-max-delay 500ms keep
 * the redelivery horizon (2.5 s) inside the TTL. */
static void claim_outlives_ttl(it_env *e, bool cluster)
{
    char log[PATH_MAX], ids_path[PATH_MAX], jsonl[PATH_MAX], cfg[PATH_MAX + 8];
    char recorder[1024];
    char **ids = NULL;
    it_cluster c;
    if (cluster) {
        assert_true(it_cluster_start(&c, e->dir, it_timeout(60000)));
        snprintf(recorder, sizeof(recorder), "kv:ttl-markers?create=1&ttl=6s&replicas=3&url=%s",
                 it_cluster_urls(&c));
    } else {
        snprintf(recorder, sizeof(recorder), "kv:ttl-markers?create=1&ttl=6s");
    }
    const char *extra[] = {"--recorder",
                           recorder,
                           "--ack-wait",
                           "2s",
                           "--max-deliver",
                           "2",
                           "--retry-delay",
                           "200ms",
                           "--retry-max-delay",
                           "500ms",
                           NULL};
    it_proc hosts[2];
    it_path(log, e, "calls.log");
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    assert_true(it_make_ids(&ids, 1, it_path(ids_path, e, "ids.txt")));
    assert_true(
        it_write_jsonl(it_path(jsonl, e, "events.jsonl"), ids, 1, "test.scripted", "sleep:15000"));
    start_host(&hosts[0], e, "host1", "ttl", "scripted", cfg, extra);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "ttl", it_timeout(30000)));
    assert_int_equal(it_publish(NULL, e, jsonl, NULL), 0);
    it_sleep_ms(9000);
    start_host(&hosts[1], e, "host2", "ttl", "scripted", cfg, extra);
    it_sleep_ms(1000);
    assert_int_equal(it_publish(NULL, e, jsonl, NULL), 0);
    assert_true(it_wait_lines(log, 1, it_timeout(60000)) >= 1);
    it_finish_hosts(e, "ttl", hosts, 2, it_timeout(60000));
    it_tally t;
    assert_true(it_tally_file(&t, log, ids_path, "ttl/scripted/scripted", "ok", 5));
    printf("kv: claim outliving a 6 s TTL (%s): %zu runs\n", cluster ? "3 replicas" : "1 replica",
           t.lines);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    char *err = it_file_read(NULL, hosts[0].err_path);
    assert_non_null(err);
    if (strstr(err, "taken over") != NULL)
        fail_msg("the first process lost its claim while its handler ran: %s", err);
    free(err);
    if (cluster)
        it_cluster_free(&c);
    it_lines_free(ids, 1);
    it_done(e);
}

static void kv_claim_outlives_ttl(void **state)
{
    claim_outlives_ttl(*state, false);
}

static void kv_claim_outlives_ttl_r3(void **state)
{
    claim_outlives_ttl(*state, true);
}

/* A bucket that forgets markers before the last redelivery can come is
 * refused at start (exit 2): with --max-deliver 5, --ack-wait 30s and
 * --retry-max-delay 1m the horizon is 4 x 90 s = 6 min, and this bucket
 * keeps keys for 1 min. */
static void kv_bucket_shorter_than_horizon_refused(void **state)
{
    it_env *e = *state;
    kvConfig kc;
    kvStore *kv = NULL;
    kvConfig_Init(&kc);
    kc.Bucket = "short-lived";
    kc.TTL = 60LL * 1000 * 1000 * 1000; /* nanoseconds in nats.c 3.4.1 */
    assert_int_equal(js_CreateKeyValue(&kv, it_server_js(&e->server), &kc), NATS_OK);
    kvStore_Destroy(kv);

    char audit[PATH_MAX], cfg[PATH_MAX + 8];
    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    it_argv a;
    it_proc p;
    it_argv_run(&a, e, "short");
    it_argv_plugin(&a, "audit", cfg);
    it_argv_addl(&a, "--recorder", "kv:short-lived", "--max-deliver", "5", "--ack-wait", "30s",
                 "--retry-max-delay", "1m", NULL);
    int st = it_proc_run(&p, e->dir, "ibus", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    char *err = it_file_read(NULL, p.err_path);
    assert_non_null(err);
    if (st != 2 || strstr(err, "shorter than the redelivery horizon of 360000 ms") == NULL)
        fail_msg("expected exit 2 naming the horizon, got %d: %s", st, err);
    free(err);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(three_hosts_concurrent_duplicates, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(kill9_midstream, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(server_restart_midstream, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(sigterm_drains, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(concurrent_copies_claimed_once, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(kv_recorder_shared_by_hosts, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(kv_bucket_shorter_than_horizon_refused, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(kv_claim_outlives_ttl, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(kv_claim_outlives_ttl_r3, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
