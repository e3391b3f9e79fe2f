/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the recorder tests: deterministic ids, an injectable
 * clock, scratch directories, and iteration counts that shrink under
 * valgrind. Header-only; each test executable includes it once. */
#ifndef IB_RTEST_H
#define IB_RTEST_H

#include <dirent.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recorder.h"
#include "uuid.h"

/* Fails the test unless `call` returned IB_OK, naming the call, its status
 * and the message of `err`, an ib_error the test file defines. cmocka's
 * fail_msg must be in scope where it is used. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        ib_status st_ = (call);                                                                    \
        if (st_ != IB_OK)                                                                          \
            fail_msg("%s -> %s: %s", #call, ib_status_str(st_), err.msg);                          \
    } while (0)

/* A uuid4-shaped normalised id derived from n: distinct for distinct n and
 * spread like random ids, so hash and b-tree behave as in production. */
static inline void rt_id(char out[IB_ID_BUF_SIZE], uint64_t n)
{
    uint8_t b[16];
    uint64_t x = n;
    for (int half = 0; half < 2; half++) {
        /* splitmix64 steps */
        x += 0x9e3779b97f4a7c15ULL;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        memcpy(b + 8 * half, &z, 8);
    }
    /* n itself goes last, so ids never collide yet do not sort in n order. */
    b[12] = (uint8_t)(n >> 24);
    b[13] = (uint8_t)(n >> 16);
    b[14] = (uint8_t)(n >> 8);
    b[15] = (uint8_t)n;
    b[11] ^= (uint8_t)(n >> 32);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    ib_id_unpack(out, b);
}

/* The injected clock: recorders opened with .now_ms = rt_clock read it. */
static _Atomic int64_t rt_now = 1700000000000;

static inline int64_t rt_clock(void)
{
    return atomic_load(&rt_now);
}

static inline void rt_clock_set(int64_t ms)
{
    atomic_store(&rt_now, ms);
}

static inline void rt_clock_advance(int64_t ms)
{
    atomic_fetch_add(&rt_now, ms);
}

static inline int rt_under_valgrind(void)
{
    const char *v = getenv("IB_UNDER_VALGRIND");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* n, or n/10 (at least 1) under valgrind. */
static inline unsigned rt_scale(unsigned n)
{
    if (!rt_under_valgrind())
        return n;
    return n / 10 > 0 ? n / 10 : 1;
}

/* A fresh scratch directory; the caller frees the string and removes the
 * directory with rt_rmtree. */
static inline char *rt_tempdir(void)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = P_tmpdir;
    size_t len = strlen(base) + 32;
    char *dir = malloc(len);
    if (dir == NULL)
        return NULL;
    snprintf(dir, len, "%s/ib-rec-XXXXXX", base);
    if (mkdtemp(dir) == NULL) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* Removes the files of a flat scratch directory and the directory. */
static inline void rt_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

#endif
