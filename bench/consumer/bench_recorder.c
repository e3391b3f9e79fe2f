/* SPDX-License-Identifier: Apache-2.0 */
/* The recorders alone, in this process, making the calls the host makes
 * per batch (claim_batch, then mark_batch): the ceiling `ibus run` cannot
 * pass whatever NATS does, and the memory recorder's own account of its
 * size (the cross-check of the RSS growth measured on a process). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>

#include "recorder.h"
#include "uuid.h"

#define CONSUMER "bench/bench_noop/noop"
#define OWNER "consumer_bench"
#define LEASE_MS 30000

/* Claims (or with `check_only`, checks) and marks `markers` fresh ids in
 * batches of `batch`; the wall time of the calls alone (ids are made
 * beforehand) goes to `*seconds`. */
static ib_status claim_and_mark(double *seconds, ib_recorder *r, size_t markers, size_t batch,
                                bool check_only, ib_error *err)
{
    char(*ids)[IB_ID_BUF_SIZE] = calloc(markers, IB_ID_BUF_SIZE);
    ib_marker_key *keys = calloc(batch, sizeof(*keys));
    ib_claim_state *states = calloc(batch, sizeof(*states));
    bool *processed = calloc(batch, sizeof(*processed));
    ib_status st = IB_OK;

    *seconds = 0;
    if (ids == NULL || keys == NULL || states == NULL || processed == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "recorder bench: out of memory");
        goto out;
    }
    for (size_t i = 0; i < markers; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%zu", i);
        ib_uuid_derive(ids[i], OWNER, name);
    }
    int64_t t0 = ib__bench_now_ns();
    for (size_t done = 0; done < markers;) {
        size_t n = markers - done < batch ? markers - done : batch;
        for (size_t i = 0; i < n; i++)
            keys[i] = (ib_marker_key){CONSUMER, ids[done + i]};
        if (check_only)
            st = ib_recorder_check_batch(r, processed, keys, n, err);
        else
            st = ib_recorder_claim_batch(r, states, keys, n, OWNER, LEASE_MS, err);
        if (st != IB_OK || (st = ib_recorder_mark_batch(r, keys, n, err)) != IB_OK)
            goto out;
        done += n;
    }
    *seconds = (double)(ib__bench_now_ns() - t0) / 1e9;
out:
    free(processed);
    free(states);
    free(keys);
    free(ids);
    return st;
}

ib_status ib__bench_recorder_rate(double *msgs_per_s, const char *uri, size_t markers, size_t batch,
                                  bool check_only, ib_error *err)
{
    ib_recorder *r = NULL;
    double seconds = 0;
    *msgs_per_s = 0;
    ib_status st = ib_recorder_open(&r, uri, NULL, err);
    if (st == IB_OK)
        st = claim_and_mark(&seconds, r, markers, batch, check_only, err);
    ib_recorder_close(r);
    if (st == IB_OK && seconds > 0)
        *msgs_per_s = (double)markers / seconds;
    return st;
}

ib_status ib__bench_memrec_bytes(double *bytes_per_marker, size_t markers, ib_error *err)
{
    ib_recorder *r = NULL;
    ib_recorder_stats stats;
    double seconds;

    *bytes_per_marker = 0;
    ib_status st = ib_recorder_open(&r, "memory:", NULL, err);
    if (st == IB_OK)
        st = claim_and_mark(&seconds, r, markers, 64, false, err);
    if (st == IB_OK)
        st = ib_recorder_stats_get(r, &stats, err);
    if (st == IB_OK && (stats.markers != markers || stats.storage_bytes == 0))
        st = ib_error_set(err, IB_ERR_RECORDER, "memory recorder: %llu markers, %llu bytes",
                          (unsigned long long)stats.markers,
                          (unsigned long long)stats.storage_bytes);
    if (st == IB_OK)
        *bytes_per_marker = (double)stats.storage_bytes / (double)stats.markers;
    ib_recorder_close(r);
    return st;
}
