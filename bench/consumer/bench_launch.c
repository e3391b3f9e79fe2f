/* SPDX-License-Identifier: Apache-2.0 */
/* Starting the consumer processes of a row, and checking afterwards that
 * they really consumed what the server says they acked. */
#include "bench.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RETIRED 256
#define REAP_TIMEOUT_MS 30000

typedef struct retired {
    ib__bench_launch launch;
    uint64_t expected;
    bool *ok;
    ib__bench_shares *shares;
} retired;

static retired retired_list[MAX_RETIRED];
static size_t retired_count;

/* Whether the row runs `ibus run` (with one plugin or the other). */
static bool is_ibus(ib__bench_kind kind)
{
    return kind == IB__BENCH_IBUS || kind == IB__BENCH_IBUS_HTTP;
}

static const char *recorder_uri(char *buf, size_t len, const ib__bench_env *env,
                                const ib__bench_config *c, const char *durable)
{
    switch (c->recorder) {
    case IB__BENCH_SQLITE_NORMAL:
        snprintf(buf, len, "sqlite:%s/%s.db?synchronous=normal", env->dir, durable);
        break;
    case IB__BENCH_SQLITE_FULL:
        snprintf(buf, len, "sqlite:%s/%s.db?synchronous=full", env->dir, durable);
        break;
    case IB__BENCH_SQLITE_BIG:
        snprintf(buf, len, "sqlite:%s/%s.db", env->dir, durable);
        break;
    case IB__BENCH_KV1:
        /* No url=: ibus opens it on its own connection to the stream's server. */
        snprintf(buf, len, "kv:bench_%s?create=1&replicas=1", durable);
        break;
    case IB__BENCH_KV3:
        snprintf(buf, len, "kv:bench_%s?create=1&replicas=3&url=%s", durable,
                 env->kv_cluster != NULL ? env->kv_cluster : "");
        break;
    default:
        snprintf(buf, len, "memory:");
        break;
    }
    return buf;
}

/* Starts the row's processes from `argv` (`argc` entries). A joiner is
 * `sh -c '... sleep S ...; exec "$0" "$@"' ibus run ...`: the same pid, started
 * join_ms after the first, while it is busy, as a user scales out. */
static ib_status spawn_all(ib__bench_launch *l, const ib__bench_env *env, const ib__bench_config *c,
                           const char *durable, char **argv, int argc, ib_error *err)
{
    char sleep_cmd[128];
    char *joiner[56];
    /* stopped before it joined (a short run): a clean exit */
    snprintf(sleep_cmd, sizeof(sleep_cmd),
             "trap 'exit 0' TERM; sleep %d.%03d & wait $!; trap - TERM; exec \"$0\" \"$@\"",
             c->join_ms / 1000, c->join_ms % 1000);
    joiner[0] = "/bin/sh";
    joiner[1] = "-c";
    joiner[2] = sleep_cmd;
    for (int k = 0; k <= argc; k++)
        joiner[3 + k] = argv[k];
    /* Several processes on a fresh 3-replica bucket: the driver makes it
     * first, as the fleet's first pod or an operator does. Each creating it
     * at the same instant, most lose the race to a bind that times out
     * while the new stream elects its leader (see bench/README.md). */
    if (c->recorder == IB__BENCH_KV3 && c->processes > 1) {
        char bucket[300];
        snprintf(bucket, sizeof(bucket), "bench_%s", durable);
        ib_status st =
            ib__bench_cluster_bucket(env->kv_cluster != NULL ? env->kv_cluster : "", bucket, err);
        if (st != IB_OK)
            return st;
    }
    if (c->recorder == IB__BENCH_SQLITE_BIG) {
        char copy[700];
        snprintf(copy, sizeof(copy), "%s/%s.db", env->dir, durable);
        if (env->big_template == NULL)
            return ib_error_set(err, IB_ERR_INVALID_ARG, "%s: no template file", c->label);
        ib_status st = ib__bench_copy_file(env->big_template, copy, err);
        if (st != IB_OK)
            return st;
    }
    l->started_ns = ib__bench_now_ns();
    for (int i = 0; i < c->processes; i++) {
        snprintf(l->logs[i], sizeof(l->logs[i]), "%s/%s.%d.log", env->dir, durable, i);
        l->joiner[l->n] = i > 0 && c->join_ms > 0;
        pid_t pid = ib__bench_spawn(l->logs[i], l->joiner[l->n] ? joiner : argv);
        if (pid < 0) {
            ib__bench_launch_stop(l);
            return ib_error_set(err, IB_ERR_IO, "%s: cannot start %s", c->label, argv[0]);
        }
        l->pids[l->n++] = pid;
    }
    return IB_OK;
}

ib_status ib__bench_launch_start(ib__bench_launch *l, const ib__bench_env *env,
                                 const ib__bench_config *c, const char *stream, const char *durable,
                                 const char *callgrind_out, ib_error *err)
{
    char batch[24], recorder[700], plugin_config[128], concurrency[24], cg_file[700];
    char *argv[48];
    int a = 0;

    memset(l, 0, sizeof(*l));
    l->kind = c->kind;
    snprintf(batch, sizeof(batch), "%ld", c->batch > 0 ? (long)c->batch : env->batch);
    snprintf(l->summary, sizeof(l->summary), "%s/%s.summary", env->dir, durable);
    if (c->processes < 1 || c->processes > IB__BENCH_MAX_PROCS)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "%s: 1..%d processes", c->label,
                            IB__BENCH_MAX_PROCS);

    if (callgrind_out != NULL) {
        snprintf(cg_file, sizeof(cg_file), "--callgrind-out-file=%s", callgrind_out);
        argv[a++] = (char *)env->valgrind;
        argv[a++] = "--tool=callgrind";
        argv[a++] = "--quiet";
        argv[a++] = cg_file;
    }
    if (!is_ibus(c->kind)) {
        argv[a++] = (char *)env->bare;
        argv[a++] = "--url";
        argv[a++] = (char *)env->url;
        argv[a++] = "--stream";
        argv[a++] = (char *)stream;
        argv[a++] = "--durable";
        argv[a++] = (char *)durable;
        argv[a++] = "--batch";
        argv[a++] = batch;
        if (c->kind == IB__BENCH_BARE_DECODE)
            argv[a++] = "--decode";
        if (c->kind == IB__BENCH_BARE_PIPELINED) {
            argv[a++] = "--pipeline";
            argv[a++] = "2";
        }
    } else {
        argv[a++] = (char *)env->ibus;
        argv[a++] = "run";
        argv[a++] = "--nats-url";
        argv[a++] = (char *)env->url;
        argv[a++] = "--stream";
        argv[a++] = (char *)stream;
        argv[a++] = "--durable";
        argv[a++] = (char *)durable;
        argv[a++] = "--plugin";
        argv[a++] = (char *)(c->kind == IB__BENCH_IBUS_HTTP ? env->http_plugin : env->plugin);
        argv[a++] = "--recorder";
        argv[a++] = (char *)recorder_uri(recorder, sizeof(recorder), env, c, durable);
        argv[a++] = "--batch";
        argv[a++] = batch;
        argv[a++] = "--summary-file";
        argv[a++] = l->summary;
        argv[a++] = "--log-format";
        argv[a++] = "text";
        argv[a++] = "--log-level";
        argv[a++] = "warn";
        if (c->concurrency > 0) {
            snprintf(concurrency, sizeof(concurrency), "%d", c->concurrency);
            argv[a++] = "--concurrency";
            argv[a++] = concurrency;
        }
        if (c->kind == IB__BENCH_IBUS_HTTP) {
            snprintf(plugin_config, sizeof(plugin_config), "http=url=%s", env->http_url);
            argv[a++] = "--plugin-config";
            argv[a++] = plugin_config;
        } else if (c->sleep_ms > 0) {
            snprintf(plugin_config, sizeof(plugin_config), "bench_noop=sleep_ms=%d", c->sleep_ms);
            argv[a++] = "--plugin-config";
            argv[a++] = plugin_config;
        }
    }
    argv[a] = NULL;

    return spawn_all(l, env, c, durable, argv, a, err);
}

/* Sums `key` (e.g. "\"acked\":" or "acked=") over every line of a file. */
static uint64_t sum_key(const char *path, const char *key)
{
    char line[2048];
    uint64_t sum = 0;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, key);
        if (p != NULL)
            sum += strtoull(p + strlen(key), NULL, 10);
    }
    fclose(f);
    return sum;
}

static uint64_t acked_by(const ib__bench_launch *l)
{
    if (is_ibus(l->kind))
        return sum_key(l->summary, "\"acked\":");
    uint64_t sum = 0;
    for (int i = 0; i < l->n; i++)
        sum += sum_key(l->logs[i], "acked=");
    return sum;
}

/* Widens `*out` by the part of the acks each process of `l` wrote in its
 * summary line. */
static void read_shares(const ib__bench_launch *l, ib__bench_shares *out)
{
    char line[2048];
    uint64_t acked[IB__BENCH_MAX_PROCS] = {0}, sum = 0;
    int lines = 0;
    FILE *f = fopen(l->summary, "re");
    if (f == NULL)
        return;
    while (lines < IB__BENCH_MAX_PROCS && fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "\"acked\":");
        if (p == NULL)
            continue;
        acked[lines] = strtoull(p + strlen("\"acked\":"), NULL, 10);
        sum += acked[lines++];
    }
    fclose(f);
    if (sum == 0)
        return;
    for (int i = 0; i < l->n; i++) {
        double share = i < lines ? (double)acked[i] / (double)sum : 0;
        if (!out->seen || share < out->lowest)
            out->lowest = share;
        if (!out->seen || share > out->highest)
            out->highest = share;
        out->seen = true;
    }
}

void ib__bench_launch_retire(const ib__bench_launch *l, uint64_t expected, bool *ok,
                             ib__bench_shares *shares)
{
    for (int i = 0; i < l->n; i++)
        kill(l->pids[i], SIGTERM);
    if (retired_count == MAX_RETIRED) {
        /* Never expected; stay correct by waiting now. */
        ib__bench_reap_all();
    }
    retired_list[retired_count++] =
        (retired){.launch = *l, .expected = expected, .ok = ok, .shares = shares};
}

bool ib__bench_launch_stop(const ib__bench_launch *l)
{
    bool ok = true;
    for (int i = 0; i < l->n; i++)
        kill(l->pids[i], SIGTERM);
    for (int i = 0; i < l->n; i++)
        if (ib__bench_stop(l->pids[i], REAP_TIMEOUT_MS) != 0)
            ok = false;
    return ok;
}

int ib__bench_reap_all(void)
{
    int failed = 0;
    for (size_t k = 0; k < retired_count; k++) {
        retired *r = &retired_list[k];
        bool ok = true;
        for (int i = 0; i < r->launch.n; i++) {
            int rc = ib__bench_stop(r->launch.pids[i], REAP_TIMEOUT_MS);
            /* A joiner the row's end stopped while it was still starting
             * (between its shell's exec and ibus taking SIGTERM over)
             * dies of the signal: nothing was in flight, and the acks
             * below still say whether the row's messages were handled. */
            if (rc == 128 + SIGTERM && r->launch.joiner[i])
                rc = 0;
            if (rc != 0) {
                fprintf(stderr, "consumer_bench: pid %ld exited %d (log %s)\n",
                        (long)r->launch.pids[i], rc, r->launch.logs[i]);
                ok = false;
            }
        }
        uint64_t acked = acked_by(&r->launch);
        if (r->shares != NULL && is_ibus(r->launch.kind) && r->launch.n > 1)
            read_shares(&r->launch, r->shares);
        if (acked < r->expected) {
            fprintf(stderr, "consumer_bench: %s acked %llu of %llu messages\n",
                    is_ibus(r->launch.kind) ? r->launch.summary : r->launch.logs[0],
                    (unsigned long long)acked, (unsigned long long)r->expected);
            ok = false;
        }
        if (!ok) {
            failed++;
            if (r->ok != NULL)
                *r->ok = false;
        }
    }
    retired_count = 0;
    return failed;
}
