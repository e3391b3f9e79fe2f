/* SPDX-License-Identifier: Apache-2.0 */
/* SQLite shared by real processes: several workers (recorder_worker.c),
 * started with fork+exec, claim and mark overlapping id ranges in one file
 * at the same moment, merging the journal as they go. Every id must be
 * done exactly once across workers, no worker may see an error
 * (SQLITE_BUSY included), and no marker may be lost. Then kill -9 during
 * merges (recorder_merger.c): every acknowledged mark survives. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

#ifndef IB_RECORDER_WORKER
#error "IB_RECORDER_WORKER must name the worker executable"
#endif
#ifndef IB_RECORDER_MERGER
#error "IB_RECORDER_MERGER must name the merger executable"
#endif

#define WORKERS 6

static void run_workers(const char *dir, unsigned ids)
{
    char db[4096], out[WORKERS][4096];
    pid_t pids[WORKERS];
    int start[2];
    snprintf(db, sizeof(db), "%s/shared.db", dir);
    assert_int_equal(pipe(start), 0);
    /* Worker k takes ids [k*ids/4, k*ids/4 + ids): each id is wanted by up
     * to four workers. */
    for (int k = 0; k < WORKERS; k++) {
        char first[32], count[32], seed[32], fd[16];
        snprintf(out[k], sizeof(out[k]), "%s/worker-%d.out", dir, k);
        snprintf(first, sizeof(first), "%u", k * ids / 4);
        snprintf(count, sizeof(count), "%u", ids);
        snprintf(seed, sizeof(seed), "%d", 1000 + k);
        snprintf(fd, sizeof(fd), "%d", start[0]);
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0) {
            close(start[1]);
            execl(IB_RECORDER_WORKER, IB_RECORDER_WORKER, db, out[k], first, count, seed, fd,
                  (char *)NULL);
            _exit(127);
        }
    }
    close(start[0]);
    close(start[1]); /* go */
    int failed = 0;
    for (int k = 0; k < WORKERS; k++) {
        int status = 0;
        while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_error("worker %d (pid %d) failed: status 0x%x\n", k, (int)pids[k], status);
            failed++;
        }
    }
    assert_int_equal(failed, 0);

    /* Count the wins: each id of the union exactly once. */
    unsigned total = (WORKERS - 1) * ids / 4 + ids;
    unsigned *wins = calloc(total, sizeof(*wins));
    assert_non_null(wins);
    unsigned lines = 0;
    for (int k = 0; k < WORKERS; k++) {
        FILE *f = fopen(out[k], "r");
        if (f == NULL)
            continue; /* a worker that won nothing wrote nothing */
        char id[64];
        int pid;
        while (fscanf(f, "%63s %d", id, &pid) == 2) {
            lines++;
            int found = 0;
            /* ids are derived from their number; find it */
            for (unsigned i = 0; i < total && !found; i++) {
                char want[IB_ID_BUF_SIZE];
                rt_id(want, i);
                if (strcmp(want, id) == 0) {
                    wins[i]++;
                    found = 1;
                }
            }
            if (!found)
                fail_msg("worker %d wrote an id outside every range: %s", k, id);
        }
        fclose(f);
    }
    for (unsigned i = 0; i < total; i++)
        if (wins[i] != 1)
            fail_msg("id %u was done %u times", i, wins[i]);
    assert_int_equal(lines, total);
    free(wins);

    /* No marker lost, for another tool too, and no claim left behind
     * (claims may sit in the journal or in the B-tree: ask the recorder). */
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT count(*) FROM processed_log WHERE "
                                        "consumer = 'proc'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), total);
    sqlite3_finalize(st);
    sqlite3_close(h);
    char uri[4200];
    ib_recorder *r = NULL;
    ib_error e;
    ib_recorder_stats stats;
    snprintf(uri, sizeof(uri), "sqlite:%s", db);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &e), IB_OK);
    assert_int_equal(ib_recorder_stats_get(r, &stats, &e), IB_OK);
    assert_int_equal(stats.markers, total);
    assert_int_equal(stats.claims, 0);
    ib_recorder_close(r);
    print_message("[ workers  ] %d processes, %u ids, each done once\n", WORKERS, total);
}

static void test_processes_claim_each_id_once(void **state)
{
    (void)state;
    char *dir = rt_tempdir();
    assert_non_null(dir);
    run_workers(dir, rt_scale(2000));
    rt_rmtree(dir);
    free(dir);
}

/* --- kill -9 during merges ------------------------------------------------- */

#define MERGE_EVERY 40 /* batches of 64 between merges: 2560 keys each */
#define ROUND_IDS (64 * 200)

typedef struct kill_round {
    uint64_t first, acked; /* ids [first, acked) were acknowledged */
    bool during_merge;     /* killed after "merging", before "merged" */
    bool killed;
} kill_round;

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Reads the merger's report lines until EOF, killing it with SIGKILL
 * `delay_us` after its `kill_at`-th "merging". */
static void follow_and_kill(kill_round *k, pid_t pid, FILE *out, unsigned kill_at,
                            unsigned delay_us)
{
    char line[128];
    unsigned merging = 0;
    bool open_merge = false;
    while (fgets(line, sizeof(line), out) != NULL) {
        unsigned long long n;
        if (sscanf(line, "acked %llu", &n) == 1) {
            k->acked = n;
        } else if (strncmp(line, "merging", 7) == 0) {
            open_merge = true;
            if (++merging == kill_at && !k->killed) {
                usleep(delay_us);
                kill(pid, SIGKILL);
                k->killed = true;
            }
        } else if (strncmp(line, "merged", 6) == 0) {
            open_merge = false;
        }
    }
    k->during_merge = k->killed && open_merge;
}

static void run_merger(kill_round *k, const char *db, unsigned pause_ms, unsigned kill_at,
                       unsigned delay_us)
{
    int p[2];
    char first[32], count[32], every[16], pause[16];
    assert_int_equal(pipe(p), 0);
    snprintf(first, sizeof(first), "%llu", (unsigned long long)k->first);
    snprintf(count, sizeof(count), "%u", ROUND_IDS);
    snprintf(every, sizeof(every), "%d", MERGE_EVERY);
    snprintf(pause, sizeof(pause), "%u", pause_ms);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], STDOUT_FILENO);
        close(p[0]);
        close(p[1]);
        execl(IB_RECORDER_MERGER, IB_RECORDER_MERGER, db, first, count, every, pause, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *out = fdopen(p[0], "r");
    assert_non_null(out);
    k->acked = k->first;
    follow_and_kill(k, pid, out, kill_at, delay_us);
    fclose(out);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (k->killed)
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static long long count_markers(sqlite3 *h)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT count(*) FROM processed_log WHERE consumer = "
                                        "'merge'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Every acknowledged id of every round is done, for the recorder and for
 * another tool, before and after a merge of whatever the victim left. */
static unsigned check_survivors(const char *db, const kill_round *rounds, size_t nrounds)
{
    char uri[4200], id[IB_ID_BUF_SIZE];
    ib_recorder *r = NULL;
    ib_error e;
    unsigned lost = 0;
    long long acked = 0;
    snprintf(uri, sizeof(uri), "sqlite:%s", db);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &e), IB_OK);
    for (int pass = 0; pass < 2; pass++) {
        acked = 0;
        for (size_t k = 0; k < nrounds; k++) {
            acked += (long long)(rounds[k].acked - rounds[k].first);
            for (uint64_t i = rounds[k].first; i < rounds[k].acked; i++) {
                bool done = false;
                rt_id(id, i);
                assert_int_equal(ib_recorder_is_processed(r, &done, "merge", id, &e), IB_OK);
                lost += !done;
            }
        }
        long long seen = count_markers(ib__sqlite_db(r));
        /* a batch may have committed without its "acked" line */
        assert_true(seen >= acked - lost && seen <= acked + 64 * (long long)nrounds);
        if (pass == 0)
            assert_int_equal(ib__sqlite_merge(r, NULL, &e), IB_OK);
    }
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(ib__sqlite_db(r), "PRAGMA integrity_check", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    ib_recorder_close(r);
    return lost;
}

/* Rounds alternate between a kill while the merge transaction waits
 * (nothing written yet) and a kill 0-20 ms into the B-tree writes, its
 * commit, or just after; the file keeps growing across rounds, so later
 * merges write into a larger tree. */
static void test_kill_during_merge_loses_nothing(void **state)
{
    (void)state;
    char *dir = rt_tempdir();
    char db[4096];
    assert_non_null(dir);
    snprintf(db, sizeof(db), "%s/merge.db", dir);
    enum { ROUNDS = 8 };
    kill_round rounds[ROUNDS];
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    unsigned kills = 0, during = 0, lost = 0;
    size_t nrounds = rt_under_valgrind() ? 2 : ROUNDS;
    for (size_t k = 0; k < nrounds; k++) {
        rounds[k] = (kill_round){.first = (uint64_t)k * ROUND_IDS};
        bool paused = k % 2 == 0;
        unsigned kill_at = 1 + (unsigned)(next_rand(&rng) % 3);
        unsigned delay_us = paused ? 0 : (unsigned)(next_rand(&rng) % 20000);
        run_merger(&rounds[k], db, paused ? 500 : 0, kill_at, delay_us);
        kills += rounds[k].killed;
        during += rounds[k].during_merge;
        lost += check_survivors(db, rounds, k + 1);
    }
    print_message("[ merges   ] %u kill -9s, %u inside a merge transaction, %u acked marks lost\n",
                  kills, during, lost);
    assert_int_equal(lost, 0);
    assert_int_equal(kills, nrounds);
    assert_true(during >= nrounds / 2); /* at least the paused rounds */
    rt_rmtree(dir);
    free(dir);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_processes_claim_each_id_once),
    cmocka_unit_test(test_kill_during_merge_loses_nothing),
};

IB_TEST_MAIN(tests)
