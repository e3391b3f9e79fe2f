/* SPDX-License-Identifier: Apache-2.0 */
/* Victim for the kill-during-merge test: claims and marks ids FIRST..
 * FIRST+COUNT-1 on one SQLite file in batches of 64, as the host does, and
 * merges the journal every MERGE_EVERY batches. It reports on stdout,
 * unbuffered, so the test knows what was committed when it kills it:
 *   "acked N"   every id below N is marked (printed after each commit);
 *   "merging K" a merge transaction is open and will write K keys
 *               (printed from inside it, then it sleeps PAUSE_MS);
 *   "merged"    that merge committed.
 * Automatic merges are off, so every merge is one the test saw announced.
 *
 * usage: recorder_merger DB FIRST COUNT MERGE_EVERY PAUSE_MS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtest.h"
#include "sqlite_internal.h"

#define BATCH 64

static unsigned pause_ms;

static void say(const char *line)
{
    size_t len = strlen(line);
    if (write(STDOUT_FILENO, line, len) != (ssize_t)len)
        _exit(3);
}

static void announce(void *ctx, size_t keys)
{
    char line[64];
    (void)ctx;
    snprintf(line, sizeof(line), "merging %zu\n", keys);
    say(line);
    struct timespec ts = {.tv_sec = pause_ms / 1000, .tv_nsec = (long)(pause_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int fail(const char *what, const ib_error *err)
{
    fprintf(stderr, "recorder_merger %d: %s: %s\n", (int)getpid(), what, err ? err->msg : "");
    return 2;
}

/* Claims and marks ids first..first+n-1 in one batch of each. */
static int one_batch(ib_recorder *r, const char *owner, uint64_t first, size_t n, ib_error *err)
{
    char ids[BATCH][IB_ID_BUF_SIZE];
    ib_marker_key keys[BATCH];
    ib_claim_info info[BATCH];
    bool marked[BATCH];
    for (size_t i = 0; i < n; i++) {
        rt_id(ids[i], first + i);
        keys[i] = (ib_marker_key){"merge", ids[i]};
    }
    ib_claim_request req = {.owner = owner, .lease_ms = 60000};
    if (ib__recorder_acquire_fp(r, info, keys, NULL, n, &req, err) != IB_OK)
        return fail("acquire", err);
    if (ib__recorder_mark_owned_fp(r, marked, keys, NULL, n, owner, err) != IB_OK)
        return fail("mark", err);
    for (size_t i = 0; i < n; i++)
        if (!marked[i])
            return fail("a mark was refused", NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: recorder_merger DB FIRST COUNT MERGE_EVERY PAUSE_MS\n");
        return 64;
    }
    uint64_t first = strtoull(argv[2], NULL, 10);
    uint64_t count = strtoull(argv[3], NULL, 10);
    unsigned every = (unsigned)strtoul(argv[4], NULL, 10);
    pause_ms = (unsigned)strtoul(argv[5], NULL, 10);
    char uri[4200], owner[64], line[64];
    ib_error err;
    ib_recorder *r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s", argv[1]);
    snprintf(owner, sizeof(owner), "merger-%d", (int)getpid());
    if (ib_recorder_open(&r, uri, NULL, &err) != IB_OK)
        return fail("open", &err);
    ib__sqlite_set_merge_keys(r, UINT64_MAX);
    ib__sqlite_set_merge_hook(r, announce, NULL);
    unsigned batches = 0;
    for (uint64_t id = first; id < first + count; id += BATCH) {
        size_t n = first + count - id < BATCH ? (size_t)(first + count - id) : BATCH;
        int rc = one_batch(r, owner, id, n, &err);
        if (rc != 0)
            return rc;
        snprintf(line, sizeof(line), "acked %llu\n", (unsigned long long)(id + n));
        say(line);
        if (every > 0 && ++batches % every == 0) {
            if (ib__sqlite_merge(r, NULL, &err) != IB_OK)
                return fail("merge", &err);
            say("merged\n");
        }
    }
    ib_recorder_close(r);
    return 0;
}
