/* SPDX-License-Identifier: Apache-2.0 */
/* marker_sizes: what one marker costs in each recorder, for sizing a
 * deployment (docs/operations.md, "Sizing").
 *
 *   marker_sizes [--memory N] [--kv N] [--nats-server PATH]
 *
 * memory: N fresh ids claimed and marked in batches of 64 in this process,
 * as ibus run does (acquire, then the fenced mark); the growth of this
 * process's resident set over those calls, per marker, beside the
 * recorder's own account (storage_bytes). The ids are made before the
 * first reading, so only the recorder's memory counts.
 *
 * kv: a nats-server started here (127.0.0.1, a free port, its own store
 * under a temporary directory, stopped by its pid), a 1-replica bucket,
 * N ids claimed and marked the same way; per marker, the server's resident
 * set growth, the bucket stream's bytes, its messages (keys written) and
 * the bytes its store directory grew on disk.
 *
 * Prints one Markdown table. Run it on a quiet machine: the resident sets
 * move with whatever else the allocators do. */
#include "bench.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recorder.h"
#include "uuid.h"

#define CONSUMER "billing/audit/audit"
#define OWNER "marker_sizes"
#define BATCH 64

/* One recorder's figures, per marker. */
typedef struct sizes {
    double rss, own, stream, disk, keys;
} sizes;

static long self_rss_kib(void)
{
    return ib__bench_proc_kib(getpid(), "VmRSS");
}

/* N derived ids, made before anything is measured. */
static char (*make_ids(size_t n))[IB_ID_BUF_SIZE]
{
    char(*ids)[IB_ID_BUF_SIZE] = calloc(n, IB_ID_BUF_SIZE);
    for (size_t i = 0; ids != NULL && i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%zu", i);
        ib_uuid_derive(ids[i], OWNER, name);
    }
    return ids;
}

/* Claims and marks every id as the host does: acquire_batch, then
 * mark_owned_batch, BATCH at a time. */
static ib_status claim_and_mark(ib_recorder *r, char (*ids)[IB_ID_BUF_SIZE], size_t n,
                                ib_error *err)
{
    ib_marker_key keys[BATCH];
    ib_claim_info info[BATCH];
    bool marked[BATCH];
    ib_claim_request req = {.owner = OWNER, .lease_ms = 30000};
    for (size_t done = 0; done < n;) {
        size_t k = n - done < BATCH ? n - done : BATCH;
        for (size_t i = 0; i < k; i++)
            keys[i] = (ib_marker_key){CONSUMER, ids[done + i]};
        ib_status st = ib_recorder_acquire_batch(r, info, keys, k, &req, err);
        if (st == IB_OK)
            st = ib_recorder_mark_owned_batch(r, marked, keys, k, OWNER, err);
        if (st != IB_OK)
            return st;
        done += k;
    }
    return IB_OK;
}

static ib_status measure_memory(sizes *out, size_t n, ib_error *err)
{
    ib_recorder *r = NULL;
    ib_recorder_stats stats;
    char(*ids)[IB_ID_BUF_SIZE] = make_ids(n);
    if (ids == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "out of memory for %zu ids", n);
    long before = self_rss_kib();
    ib_status st = ib_recorder_open(&r, "memory:", NULL, err);
    if (st == IB_OK)
        st = claim_and_mark(r, ids, n, err);
    if (st == IB_OK)
        st = ib_recorder_stats_get(r, &stats, err);
    if (st == IB_OK) {
        out->rss = (double)(self_rss_kib() - before) * 1024.0 / (double)n;
        out->own = (double)stats.storage_bytes / (double)n;
    }
    ib_recorder_close(r);
    free(ids);
    return st;
}

/* Bytes of the regular files under `dir`, recursively. */
static uint64_t dir_bytes(const char *dir)
{
    uint64_t sum = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[1024];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (lstat(path, &st) != 0)
            continue;
        sum += S_ISDIR(st.st_mode) ? dir_bytes(path) : (uint64_t)st.st_size;
    }
    if (d != NULL)
        closedir(d);
    return sum;
}

/* The bucket stream's message and byte counts. */
static ib_status stream_state(uint64_t *msgs, uint64_t *bytes, const char *url, ib_error *err)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    ib_status st = ib__bench_connect(&nc, &js, url, err);
    if (st == IB_OK && js_GetStreamInfo(&si, js, "KV_sizes", NULL, &jerr) != NATS_OK)
        st = ib_error_set(err, IB_ERR_NATS, "stream info of KV_sizes (jetstream error %d)",
                          (int)jerr);
    if (st == IB_OK) {
        *msgs = si->State.Msgs;
        *bytes = si->State.Bytes;
    }
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

static ib_status measure_kv(sizes *out, size_t n, const char *server_exe, ib_error *err)
{
    char dir[] = "/tmp/ib-marker-sizes.XXXXXX", uri[256], store[600];
    ib__bench_server s;
    ib_recorder *r = NULL;
    uint64_t msgs = 0, bytes = 0;
    char(*ids)[IB_ID_BUF_SIZE] = make_ids(n);
    if (ids == NULL || mkdtemp(dir) == NULL)
        return ib_error_set(err, IB_ERR_IO, "no ids or no temporary directory");
    ib_status st = ib__bench_server_start(&s, server_exe, dir, err);
    if (st != IB_OK)
        goto out;
    snprintf(uri, sizeof(uri), "kv:sizes?url=%s&create=1&replicas=1", s.url);
    snprintf(store, sizeof(store), "%s/jetstream", dir);
    st = ib_recorder_open(&r, uri, NULL, err);
    long rss0 = ib__bench_proc_kib(s.pid, "VmRSS");
    uint64_t disk0 = dir_bytes(store);
    if (st == IB_OK)
        st = claim_and_mark(r, ids, n, err);
    ib_recorder_close(r);
    if (st == IB_OK)
        st = stream_state(&msgs, &bytes, s.url, err);
    if (st == IB_OK) {
        out->rss = (double)(ib__bench_proc_kib(s.pid, "VmRSS") - rss0) * 1024.0 / (double)n;
        out->stream = (double)bytes / (double)n;
        out->disk = (double)(dir_bytes(store) - disk0) / (double)n;
        out->keys = (double)msgs / (double)n;
    }
    ib__bench_server_stop(&s);
out:
    free(ids);
    return st;
}

int main(int argc, char **argv)
{
    size_t n_memory = 1000000, n_kv = 50000;
    const char *server = "nats-server";
    ib_error e;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--memory") == 0)
            n_memory = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--kv") == 0)
            n_kv = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--nats-server") == 0)
            server = argv[i + 1];
        else
            argc = 0; /* an unknown option ends the loop and says usage */
    }
    if (argc == 0 || n_memory == 0 || n_kv == 0) {
        fprintf(stderr, "usage: marker_sizes [--memory N] [--kv N] [--nats-server PATH]\n");
        return 2;
    }
    sizes mem = {0}, kv = {0};
    if (measure_memory(&mem, n_memory, &e) != IB_OK || measure_kv(&kv, n_kv, server, &e) != IB_OK) {
        fprintf(stderr, "marker_sizes: %s\n", e.msg);
        return 1;
    }
    printf(
        "| recorder | markers | resident memory per marker | its own account | stream bytes "
        "per marker | disk per marker | keys per marker |\n|---|---:|---:|---:|---:|---:|---:|\n");
    printf("| memory: (this process) | %zu | %.1f B | %.1f B | - | - | - |\n", n_memory, mem.rss,
           mem.own);
    printf("| kv: 1 replica (nats-server) | %zu | %.1f B | - | %.1f B | %.1f B | %.2f |\n", n_kv,
           kv.rss, kv.stream, kv.disk, kv.keys);
    return 0;
}
