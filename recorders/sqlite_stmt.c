/* sqlite: the statement helpers every part of the recorder uses, and the
 * busy handler and back-off of the retry loop (sqlite_exec.c). Nothing
 * here starts or ends a transaction. */
#include "sqlite_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "uuid.h"

#define BACKOFF_MAX_US 100000
#define BUSY_FIRST_US 50
#define BUSY_MAX_US 2000

bool ib__sq_retryable(int rc)
{
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_PROTOCOL;
}

/* Sleeps between half and all of `us`, jittered by xorshift so that
 * processes that collided do not collide again. */
static void jittered_sleep(sq_recorder *s, unsigned us)
{
    s->jitter ^= s->jitter << 13;
    s->jitter ^= s->jitter >> 7;
    s->jitter ^= s->jitter << 17;
    us = us / 2 + (unsigned)(s->jitter % (us / 2 + 1));
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void ib__sq_backoff(sq_recorder *s, unsigned *delay_us)
{
    jittered_sleep(s, *delay_us);
    if (*delay_us < BACKOFF_MAX_US)
        *delay_us *= 2;
}

int ib__sq_busy_wait(void *ctx, int count)
{
    sq_recorder *s = ctx;
    int64_t now = ib_clock_monotonic_ns();
    if (count == 0)
        s->busy_since_ns = now;
    if (now - s->busy_since_ns >= s->busy_timeout_ms * 1000000)
        return 0;
    jittered_sleep(s, count < 6 ? BUSY_FIRST_US << count : BUSY_MAX_US);
    return 1;
}

int ib__sq_step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    int rrc = sqlite3_reset(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        return rrc;
    return rc;
}

/* --- statement helpers --------------------------------------------------- */

int ib__sq_bind_key(sqlite3_stmt *st, const char *consumer, const char *event_id)
{
    int rc = sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, event_id, IB_ID_LEN, SQLITE_STATIC);
    return rc;
}

int ib__sq_exec_key(sqlite3_stmt *st, const char *consumer, const char *event_id)
{
    int rc = ib__sq_bind_key(st, consumer, event_id);
    if (rc != SQLITE_OK) {
        sqlite3_reset(st);
        return rc;
    }
    return ib__sq_step_done(st);
}

int ib__sq_read_count(uint64_t *out, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = (uint64_t)sqlite3_column_int64(st, 0);
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(st);
    return rc != SQLITE_DONE ? rc : rrc;
}
