/* SPDX-License-Identifier: Apache-2.0 */
/* Worker for the multi-process test: claims every id of its range on one
 * SQLite file; for each claim it wins it appends "<id> <pid>" to its own
 * output file, then marks the id. Ids it finds busy are retried until they
 * are done. Exits non-zero on any error, SQLITE_BUSY included, so the test
 * sees every failure.
 *
 * usage: recorder_worker DB OUT FIRST COUNT SEED START_FD */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtest.h"
#include "sqlite_internal.h"

static int fail(const char *what, const ib_error *err)
{
    fprintf(stderr, "recorder_worker %d: %s: %s\n", (int)getpid(), what, err ? err->msg : "");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: recorder_worker DB OUT FIRST COUNT SEED START_FD\n");
        return 64;
    }
    const char *db = argv[1], *out = argv[2];
    uint64_t first = strtoull(argv[3], NULL, 10);
    size_t count = strtoul(argv[4], NULL, 10);
    uint64_t seed = strtoull(argv[5], NULL, 10) | 1;
    int start_fd = atoi(argv[6]);
    char uri[4200], owner[64], line[64];
    ib_error err;
    ib_recorder *r = NULL;

    snprintf(uri, sizeof(uri), "sqlite:%s", db);
    snprintf(owner, sizeof(owner), "worker-%d", (int)getpid());
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail("open output", NULL);
    uint64_t *todo = malloc(count * sizeof(*todo));
    if (todo == NULL)
        return fail("malloc", NULL);
    /* Each worker walks its ids in its own shuffled order. */
    for (size_t i = 0; i < count; i++)
        todo[i] = first + i;
    for (size_t i = count; i > 1; i--) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        size_t j = seed % i;
        uint64_t t = todo[i - 1];
        todo[i - 1] = todo[j];
        todo[j] = t;
    }
    if (ib_recorder_open(&r, uri, NULL, &err) != IB_OK)
        return fail("open recorder", &err);
    /* Start together: the parent closes its end of the pipe. */
    char b;
    while (read(start_fd, &b, 1) < 0 && errno == EINTR) {
    }
    close(start_fd);

    size_t left = count;
    while (left > 0) {
        size_t busy = 0;
        for (size_t i = 0; i < left; i++) {
            char id[IB_ID_BUF_SIZE];
            ib_claim_state cs;
            rt_id(id, todo[i]);
            if (ib_recorder_claim(r, &cs, "proc", id, owner, 60000, &err) != IB_OK)
                return fail("claim", &err);
            if (cs == IB_CLAIM_BUSY) {
                todo[busy++] = todo[i];
                continue;
            }
            if (cs != IB_CLAIM_ACQUIRED)
                continue;
            int n = snprintf(line, sizeof(line), "%s %d\n", id, (int)getpid());
            if (write(fd, line, (size_t)n) != n)
                return fail("write output", NULL);
            if (ib_recorder_mark(r, "proc", id, &err) != IB_OK)
                return fail("mark", &err);
        }
        left = busy;
        if (left > 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    /* Every id of the range is done now, whoever did it. */
    for (size_t i = 0; i < count; i++) {
        char id[IB_ID_BUF_SIZE];
        bool p = false;
        rt_id(id, first + i);
        if (ib_recorder_is_processed(r, &p, "proc", id, &err) != IB_OK)
            return fail("is_processed", &err);
        if (!p)
            return fail("an id of the range is not done", NULL);
    }
    ib_recorder_close(r);
    free(todo);
    close(fd);
    return 0;
}
