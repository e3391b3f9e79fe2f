/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: the write turn, a queue of the processes that want to write the
 * marker file (the top of sqlite.c, "Concurrency", says why).
 *
 * SQLite's write lock has no queue: a writer that finds it taken sleeps in
 * the busy handler and looks again, so between the holder's COMMIT and the
 * next look the lock sits free while writers wait, and a writer that looks
 * at the wrong moments can lose every race until its busy timeout. The turn
 * puts a queue in front of it: a process-shared, robust, priority-inheriting
 * mutex in a page mapped from the file "<marker file>-turn". Every write
 * transaction of this recorder takes the turn before BEGIN IMMEDIATE and
 * gives it back after its COMMIT or ROLLBACK, so
 *   - a waiter sleeps in the kernel and is woken when the turn is given
 *     back; the kernel hands a priority-inheriting mutex to the waiter that
 *     waited longest among equals (FIFO), so nobody starves and the lock is
 *     never free while someone waits for it;
 *   - a holder killed in its turn does not block the others: the next taker
 *     gets EOWNERDEAD, marks the mutex consistent and goes on (SQLite rolls
 *     the dead holder's transaction back on its own);
 *   - a wait ends at the call's deadline (the busy timeout), as every wait
 *     of the recorder does: the call then fails as BUSY would;
 *   - tools that do not know the turn (the sqlite3 shell, the seed's SQL)
 *     still meet SQLite's own lock, and the busy handler waits for them.
 * No signal handler, no thread. A process that cannot open or map the turn
 * file (a read-only directory, a file of an unknown layout) runs without
 * one, as before the turn existed: writers then poll. */
#include "sqlite_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define TURN_MAGIC 0x4e544249u /* "IBTN" */
#define TURN_VERSION 1u
#define TURN_BYTES 4096

/* The page shared by every process on the file. */
typedef struct turn_page {
    uint32_t magic;
    uint32_t version;
    uint32_t mutex_size; /* sizeof(pthread_mutex_t) of the process that made it */
    uint32_t unused;
    pthread_mutex_t mu;
} turn_page;

_Static_assert(sizeof(turn_page) <= TURN_BYTES, "the turn page is one page");

/* Makes the mutex of a page that has none yet (under flock, so once). */
static int turn_init(turn_page *p)
{
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
    if (rc != 0)
        return rc;
    rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
    if (rc == 0)
        rc = pthread_mutex_init(&p->mu, &a);
    pthread_mutexattr_destroy(&a);
    if (rc != 0)
        return rc;
    p->version = TURN_VERSION;
    p->mutex_size = (uint32_t)sizeof(pthread_mutex_t);
    atomic_thread_fence(memory_order_release);
    p->magic = TURN_MAGIC;
    return 0;
}

void ib__sq_turn_open(sq_recorder *s, unsigned mode)
{
    char path[IB__RECORDER_PATH_MAX + 8];
    s->turn = NULL;
    if (s->in_memory)
        return;
    snprintf(path, sizeof(path), "%s-turn", s->path);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode != 0 ? mode : 0600);
    if (fd < 0)
        return;
    struct stat st;
    void *map = MAP_FAILED;
    bool usable = false;
    if (flock(fd, LOCK_EX) == 0) {
        /* a new file gets the mode whatever the umask, as the marker file */
        if (fstat(fd, &st) == 0 && st.st_size == 0 && fchmod(fd, mode != 0 ? mode : 0600) == 0 &&
            ftruncate(fd, TURN_BYTES) == 0)
            st.st_size = TURN_BYTES;
        if (st.st_size >= TURN_BYTES)
            map = mmap(NULL, TURN_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            turn_page *p = map;
            if (p->magic == 0 && p->version == 0)
                usable = turn_init(p) == 0;
            else
                usable = p->magic == TURN_MAGIC && p->version == TURN_VERSION &&
                         p->mutex_size == sizeof(pthread_mutex_t);
        }
        flock(fd, LOCK_UN);
    }
    close(fd);
    if (!usable) {
        if (map != MAP_FAILED)
            munmap(map, TURN_BYTES);
        return;
    }
    s->turn = map;
}

void ib__sq_turn_close(sq_recorder *s)
{
    if (s->turn != NULL)
        munmap(s->turn, TURN_BYTES);
    s->turn = NULL;
}

int ib__sq_turn_take(sq_recorder *s)
{
    if (s->turn == NULL || s->turn_held)
        return SQLITE_OK;
    turn_page *p = s->turn;
    /* The robust priority-inheriting mutex waits on the realtime clock:
     * the monotonic deadline is carried over to it. */
    int64_t left_ns = s->deadline_ns - ib_clock_monotonic_ns();
    struct timespec abs;
    clock_gettime(CLOCK_REALTIME, &abs);
    if (left_ns < 0)
        left_ns = 0;
    int64_t ns = abs.tv_nsec + left_ns % 1000000000;
    abs.tv_sec += (time_t)(left_ns / 1000000000 + ns / 1000000000);
    abs.tv_nsec = (long)(ns % 1000000000);
    int rc = pthread_mutex_timedlock(&p->mu, &abs);
    if (rc == EOWNERDEAD) {
        /* its holder died in its turn; SQLite recovers the file itself */
        pthread_mutex_consistent(&p->mu);
        rc = 0;
    }
    if (rc == 0) {
        s->turn_held = true;
        return SQLITE_OK;
    }
    if (rc == ETIMEDOUT)
        return SQLITE_BUSY;
    /* ENOTRECOVERABLE or worse: the turn is no use any more; this process
     * writes without it, as a process without a turn file does */
    ib__sq_turn_close(s);
    return SQLITE_OK;
}

void ib__sq_turn_end(sq_recorder *s)
{
    if (!s->turn_held)
        return;
    s->turn_held = false;
    pthread_mutex_unlock(&((turn_page *)s->turn)->mu);
}
