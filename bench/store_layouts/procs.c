/* SPDX-License-Identifier: Apache-2.0 */
/* The multi-process variant: --procs processes share one file, the way a
 * user scales out. The first starts alone; once it has committed its first
 * batch and run --join-ms more, the others join. Each is this program run
 * again (fork/exec, --child), with ids of its own, and writes what it saw
 * to a report file: its start and end, the longest wait for the write
 * lock, the largest WAL, and the new ids marked after every batch, so the
 * driver can tell the rate while all of them ran (store_layouts.h). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_layouts.h"

#define MAX_PROCS 8
#define READY_TIMEOUT_MS 120000
#define CHILD_SEED 0xc41dULL

typedef struct report_head {
    double start_ms, end_ms; /* CLOCK_MONOTONIC, the same in every process */
    double wait_max_ms;
    int64_t wal_max_bytes;
    uint64_t fresh, samples;
} report_head;

typedef struct sample {
    double t_ms;
    uint64_t done;
} sample;

typedef struct child_log {
    sample *s;
    size_t n;
    int ready_fd;
} child_log;

static void on_batch(void *ctx, size_t fresh_done)
{
    child_log *c = ctx;
    c->s[c->n++] = (sample){ib__sl_now_ms(), fresh_done};
    if (c->ready_fd >= 0) {
        char b = 1;
        (void)!write(c->ready_fd, &b, 1);
        close(c->ready_fd);
        c->ready_fd = -1;
    }
}

static void write_report(const char *path, const report_head *h, const sample *s)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(h, sizeof(*h), 1, f) != 1 ||
        fwrite(s, sizeof(*s), h->samples, f) != h->samples || fclose(f) != 0)
        ib__sl_die("cannot write %s", path);
}

int ib__sl_child_main(const ib__sl_opts *o)
{
    const ib__sl_layout *L = ib__sl_layout_named(o->child_layout);
    ib__sl_stream st;
    ib__sl_store s;
    ib__sl_result r = {0};
    if (L == NULL)
        ib__sl_die("--child: no layout named %s", o->child_layout);
    ib__sl_stream_make(&st, o->ids, o->batch, o->seed);
    child_log log = {.s = calloc(st.n / st.batch + 2, sizeof(sample)), .ready_fd = o->ready_fd};
    if (log.s == NULL)
        ib__sl_die("out of memory");
    ib__sl_store_open(&s, o->child_file, L, o->synchronous);
    L->open(&s);
    report_head h = {.start_ms = ib__sl_now_ms()};
    ib__sl_run_stream(&r, &s, &st, on_batch, &log);
    h.end_ms = ib__sl_now_ms();
    h.wait_max_ms = s.stats.wait_max_ms;
    h.wal_max_bytes = s.stats.wal_max_bytes;
    h.fresh = r.fresh;
    h.samples = log.n;
    ib__sl_store_close(&s);
    write_report(o->child_report, &h, log.s);
    free(log.s);
    ib__sl_stream_free(&st);
    return 0;
}

/* ---- the driver's side ----------------------------------------------------- */

typedef struct child {
    pid_t pid;
    char report[4200];
    report_head h;
    sample *s;
} child;

static pid_t spawn(const ib__sl_opts *o, const char *layout, const char *work, child *c, int k,
                   int ready_fd)
{
    char ids[32], batch[32], sync[16], seed[32], fd[16];
    snprintf(ids, sizeof(ids), "%zu", o->procs_ids);
    snprintf(batch, sizeof(batch), "%zu", o->batch);
    static const char *const sync_names[] = {"off", "normal", "full", "extra"};
    snprintf(sync, sizeof(sync), "%s", sync_names[o->synchronous & 3]);
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)(o->seed ^ (CHILD_SEED * (k + 1))));
    snprintf(fd, sizeof(fd), "%d", ready_fd);
    char *argv[] = {"store_layouts",
                    "--child",
                    (char *)layout,
                    "--file",
                    (char *)work,
                    "--ids",
                    ids,
                    "--batch",
                    batch,
                    "--synchronous",
                    sync,
                    "--seed",
                    seed,
                    "--report",
                    c->report,
                    "--ready-fd",
                    fd,
                    NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        ib__sl_die("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Nothing outlives the driver, whatever ends it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "store_layouts: exec: %s\n", strerror(errno));
        _exit(127);
    }
    return pid;
}

/* Waits for the first child's first batch; false when it never came. */
static bool wait_ready(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b;
    return poll(&p, 1, READY_TIMEOUT_MS) == 1 && read(fd, &b, 1) == 1;
}

static void reap(child *cs, int n)
{
    bool failed = false;
    for (int k = 0; k < n; k++) {
        int status = 0;
        while (waitpid(cs[k].pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "store_layouts: process %d of %d failed (status 0x%x)\n", k + 1, n,
                    status);
            failed = true;
        }
    }
    if (failed)
        ib__sl_die("the multi-process run failed");
}

static void read_report(child *c)
{
    FILE *f = fopen(c->report, "rb");
    if (f == NULL || fread(&c->h, sizeof(c->h), 1, f) != 1)
        ib__sl_die("cannot read %s", c->report);
    c->s = calloc(c->h.samples + 1, sizeof(*c->s));
    if (c->s == NULL || fread(c->s, sizeof(*c->s), c->h.samples, f) != c->h.samples)
        ib__sl_die("cannot read the samples of %s", c->report);
    fclose(f);
    unlink(c->report);
}

/* New ids a child had marked at time t. */
static double done_at(const child *c, double t)
{
    uint64_t done = 0;
    for (size_t i = 0; i < c->h.samples && c->s[i].t_ms <= t; i++)
        done = c->s[i].done;
    return (double)done;
}

static void figures(ib__sl_procs_result *r, child *cs, int n)
{
    double first = cs[0].h.start_ms, last = cs[0].h.end_ms;
    double all_in = cs[0].h.start_ms, first_out = cs[0].h.end_ms;
    for (int k = 0; k < n; k++) {
        const report_head *h = &cs[k].h;
        first = h->start_ms < first ? h->start_ms : first;
        last = h->end_ms > last ? h->end_ms : last;
        all_in = h->start_ms > all_in ? h->start_ms : all_in;
        first_out = h->end_ms < first_out ? h->end_ms : first_out;
        r->fresh += h->fresh;
        r->wait_max_ms = h->wait_max_ms > r->wait_max_ms ? h->wait_max_ms : r->wait_max_ms;
        if (h->wal_max_bytes > r->wal_max_bytes)
            r->wal_max_bytes = h->wal_max_bytes;
    }
    r->total_rate = (double)r->fresh / ((last - first) / 1e3);
    double in_window = 0;
    for (int k = 0; k < n && first_out > all_in; k++)
        in_window += done_at(&cs[k], first_out) - done_at(&cs[k], all_in);
    r->window_rate = first_out > all_in ? in_window / ((first_out - all_in) / 1e3) : 0;
}

/* The first process, and once it is busy, the others. */
static void start_all(child *cs, int n, const ib__sl_layout *L, const char *work,
                      const ib__sl_opts *o)
{
    int fds[2];
    if (pipe(fds) != 0)
        ib__sl_die("pipe: %s", strerror(errno));
    for (int k = 0; k < n; k++)
        snprintf(cs[k].report, sizeof(cs[k].report), "%s.report%d", work, k);
    cs[0].pid = spawn(o, L->name, work, &cs[0], 0, fds[1]);
    close(fds[1]);
    bool ready = wait_ready(fds[0]);
    close(fds[0]);
    if (!ready) {
        kill(cs[0].pid, SIGKILL);
        reap(cs, 1);
        ib__sl_die("the first process did not commit a batch within %d s", READY_TIMEOUT_MS / 1000);
    }
    usleep((useconds_t)o->join_ms * 1000);
    for (int k = 1; k < n; k++)
        cs[k].pid = spawn(o, L->name, work, &cs[k], k, -1);
}

void ib__sl_procs_run(ib__sl_procs_result *r, const ib__sl_layout *L, const char *work,
                      const ib__sl_opts *o, uint64_t preloaded)
{
    child cs[MAX_PROCS] = {0};
    int n = o->procs < MAX_PROCS ? o->procs : MAX_PROCS;
    ib__sl_store s;
    memset(r, 0, sizeof(*r));
    ib__sl_read_through(work);
    start_all(cs, n, L, work, o);
    reap(cs, n);
    for (int k = 0; k < n; k++)
        read_report(&cs[k]);
    figures(r, cs, n);
    ib__sl_store_open(&s, work, L, o->synchronous);
    L->open(&s);
    uint64_t markers = L->count(&s);
    ib__sl_store_close(&s);
    if (markers != preloaded + r->fresh)
        ib__sl_die("%s, %d processes: %llu markers, expected %llu", L->name, n,
                   (unsigned long long)markers, (unsigned long long)(preloaded + r->fresh));
    for (int k = 0; k < n; k++)
        free(cs[k].s);
    r->ran = true;
}
