/* SPDX-License-Identifier: Apache-2.0 */
/* See chaos_common.h. */
#include "chaos_common.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"

uint64_t chaos_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double chaos_rng_unit(uint64_t *s)
{
    return (double)(chaos_rng_next(s) >> 11) / 9007199254740992.0;
}

long chaos_rng_range(uint64_t *s, long lo, long hi)
{
    return hi <= lo ? lo : lo + (long)(chaos_rng_next(s) % (uint64_t)(hi - lo + 1));
}

void chaos_make_id(char out[33], uint64_t *rng, size_t index)
{
    uint8_t b[16];
    uint64_t r1 = chaos_rng_next(rng), r2 = chaos_rng_next(rng);
    memcpy(b, &r1, 8);
    memcpy(b + 8, &r2, 2);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    for (int i = 0; i < 6; i++)
        b[10 + i] = (uint8_t)((uint64_t)index >> (8 * (5 - i)));
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

long chaos_id_index(const char *id, char *const *ids, size_t n)
{
    if (strlen(id) != 32)
        return -1;
    char *end = NULL;
    unsigned long long idx = strtoull(id + 20, &end, 16);
    if (*end != '\0' || idx >= n || strcmp(ids[idx], id) != 0)
        return -1;
    return (long)idx;
}

long chaos_env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return def;
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 0)
        fail_msg("%s: expected a non-negative integer, got '%s'", name, v);
    return n;
}

size_t chaos_seeds(unsigned long *out, size_t max, const char *def)
{
    const char *env = getenv("IB_CHAOS_SEEDS");
    const char *text = env != NULL && env[0] != '\0' ? env : def;
    char *copy = strdup(text), *save = NULL;
    size_t n = 0;
    assert_non_null(copy);
    for (char *t = strtok_r(copy, ", ", &save); t != NULL; t = strtok_r(NULL, ", ", &save)) {
        if (n == max)
            fail_msg("IB_CHAOS_SEEDS: more than %zu seeds", max);
        out[n++] = strtoul(t, NULL, 10);
    }
    free(copy);
    if (n == 0)
        fail_msg("IB_CHAOS_SEEDS: no seed in '%s'", text);
    return n;
}

FILE *chaos_report_open(void)
{
    const char *path = getenv("IB_CHAOS_REPORT");
    if (path == NULL || path[0] == '\0')
        return NULL;
    FILE *f = fopen(path, "a");
    if (f == NULL)
        fprintf(stderr, "chaos: cannot append to %s: %s\n", path, strerror(errno));
    return f;
}

void chaos_print_last_words(const it_proc *p)
{
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, p->err_path);
    if (n > 0)
        printf("    %s: %s\n", p->name, lines[n - 1]);
    it_lines_free(lines, n);
}

void chaos_report_exit(const it_proc *p)
{
    printf("  %s exited on its own with status %d; restarted\n", p->name, p->status);
    chaos_print_last_words(p);
}

bool chaos_subscriber_up(const it_proc *p, int64_t spawned_at)
{
    return it_file_contains(p->err_path, "\"msg\":\"running\"") ||
           it_now_ms() - spawned_at >= it_timeout(CHAOS_STARTUP_MS);
}

bool chaos_wait_idle(it_server *s, const char *durable, long timeout_ms)
{
    it_consumer_state st;
    if (it_wait_consumer_idle(&st, s, IT_STREAM, durable, timeout_ms))
        return true;
    printf("  not idle after %ld ms: pending %" PRIu64 ", ack pending %" PRIu64 "\n", timeout_ms,
           st.pending, st.ack_pending);
    return false;
}

int chaos_stop_all(it_proc *procs, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++)
        it_proc_signal(&procs[i], SIGTERM);
    for (int i = 0; i < n; i++) {
        int status = it_proc_wait(&procs[i], it_timeout(60000));
        if (status == 0)
            continue;
        bad++;
        printf("  %s ended with status %d after SIGTERM\n", procs[i].name, status);
        chaos_print_last_words(&procs[i]);
        it_proc_stop(&procs[i], SIGKILL, 1000);
    }
    return bad;
}
