/* SPDX-License-Identifier: Apache-2.0 */
/* SQLite shared by real processes: several workers (recorder_worker.c),
 * started with fork+exec, claim and mark overlapping id ranges in one file
 * at the same moment. Every id must be done exactly once across workers,
 * no worker may see an error (SQLITE_BUSY included), and no marker may be
 * lost. kill -9 at random moments is the model test's (test_model.c). */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

#ifndef IB_RECORDER_WORKER
#error "IB_RECORDER_WORKER must name the worker executable"
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

    /* No marker lost, for another tool too, and no claim left behind. */
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

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_processes_claim_each_id_once),
};

IB_TEST_MAIN(tests)
