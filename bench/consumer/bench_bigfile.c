/* SPDX-License-Identifier: Apache-2.0 */
/* A marker file that already holds many markers, for the rows that measure
 * start-up and throughput on a large file (issues 21, 30): filled once per
 * run, straight into the markers table in the random order real marks
 * arrive in (so its pages are as full as a real file's, not packed by a
 * sorted fill), under a consumer identity no row uses, and copied for every
 * cell so each starts from the same file. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "recorder.h"

ib_status ib__bench_big_template(char *out, size_t len, const char *dir, size_t markers,
                                 ib_error *err)
{
    char uri[700], sql[1024];
    ib_recorder *r = NULL;
    snprintf(out, len, "%s/big-template.db", dir);
    snprintf(uri, sizeof(uri), "sqlite:%s", out);
    /* the recorder lays out the current schema */
    ib_status st = ib_recorder_open(&r, uri, NULL, err);
    if (st != IB_OK)
        return st;
    ib_recorder_close(r);
    sqlite3 *db = NULL;
    if (sqlite3_open(out, &db) != SQLITE_OK)
        return ib_error_set(err, IB_ERR_IO, "%s: %s", out, sqlite3_errmsg(db));
    snprintf(sql, sizeof(sql),
             "PRAGMA journal_mode = WAL; PRAGMA cache_size = -262144; BEGIN; "
             "INSERT INTO processed_consumers (name) VALUES ('bench/fill/fill'); "
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %zu) "
             "INSERT OR IGNORE INTO processed_markers (cid, event_id, ts, fp) "
             "SELECT (SELECT cid FROM processed_consumers WHERE name = 'bench/fill/fill'), "
             "lower(hex(randomblob(16))), CAST(unixepoch() AS INTEGER) * 1000, "
             "random() >> 32 FROM n; COMMIT; "
             "PRAGMA wal_checkpoint(TRUNCATE)",
             markers);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        st = ib_error_set(err, IB_ERR_IO, "%s: %s", out, msg != NULL ? msg : "fill failed");
    sqlite3_free(msg);
    sqlite3_close(db);
    return st;
}

ib_status ib__bench_copy_file(const char *from, const char *to, ib_error *err)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int outfd = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    struct stat sb;
    ib_status st = IB_OK;
    if (in < 0 || outfd < 0 || fstat(in, &sb) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "copy %s to %s: %s", from, to, strerror(errno));
    } else {
        off_t left = sb.st_size;
        while (left > 0) {
            ssize_t n = copy_file_range(in, NULL, outfd, NULL, (size_t)left, 0);
            if (n <= 0) {
                st = ib_error_set(err, IB_ERR_IO, "copy %s: %s", from, strerror(errno));
                break;
            }
            left -= n;
        }
    }
    if (in >= 0)
        close(in);
    if (outfd >= 0)
        close(outfd);
    return st;
}
