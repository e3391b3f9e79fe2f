/* SPDX-License-Identifier: Apache-2.0 */
/* Throughput measured from the outside, the same way for every row: the
 * driver polls the consumer's info on the server and times the acks it
 * sees. The consumer process is not asked anything, so a bare consumer and
 * `ibus run` are judged by one clock and one definition of "done". */
#include "bench.h"

#include <stdio.h>
#include <string.h>

typedef struct poll_view {
    uint64_t acked; /* deliveries acked so far */
    bool done;      /* nothing left to deliver or to ack */
    int64_t waiting;
} poll_view;

static ib_status poll_once(poll_view *v, jsCtx *js, const char *stream, const char *durable,
                           uint64_t total, ib_error *err)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr);
    if (s != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "consumer info %s/%s: %s (jetstream error %d)",
                            stream, durable, natsStatus_GetText(s), (int)jerr);
    uint64_t delivered = ci->Delivered.Consumer;
    uint64_t pending_acks = ci->NumAckPending > 0 ? (uint64_t)ci->NumAckPending : 0;
    v->acked = delivered > pending_acks ? delivered - pending_acks : 0;
    if (v->acked > total)
        v->acked = total; /* redeliveries count once */
    v->done = ci->NumPending == 0 && ci->NumAckPending == 0 && ci->Delivered.Stream >= total;
    v->waiting = ci->NumWaiting;
    jsConsumerInfo_Destroy(ci);
    return IB_OK;
}

/* CPU seconds used so far by the consumers and by the server. */
static void sample_cpu(double *consumers, double *server, const ib__bench_watch *w)
{
    *consumers = 0;
    *server = 0;
    if (w == NULL)
        return;
    for (int i = 0; i < w->n; i++) {
        double s = ib__bench_proc_cpu_s(w->pids[i]);
        if (s > 0)
            *consumers += s;
    }
    if (w->server > 0)
        *server = ib__bench_proc_cpu_s(w->server);
}

ib_status ib__bench_measure(ib__bench_rate *out, jsCtx *js, const char *stream, const char *durable,
                            uint64_t total, int64_t poll_ms, int64_t stall_ms,
                            const ib__bench_watch *w, ib_error *err)
{
    poll_view v;
    uint64_t last_acked = 0;
    int64_t last_progress = ib__bench_now_ms();
    pid_t mem_pid = w != NULL && w->n > 0 ? w->pids[0] : 0;
    double cpu_first = 0, server_first = 0;

    memset(out, 0, sizeof(*out));
    out->total = total;
    out->rss_first_kib = -1;
    out->rss_done_kib = -1;
    out->hwm_done_kib = -1;
    for (;;) {
        int64_t now_ns = ib__bench_now_ns();
        ib_status st = poll_once(&v, js, stream, durable, total, err);
        if (st != IB_OK)
            return st;
        if (out->t_first_ns == 0 && v.acked > 0) {
            out->t_first_ns = now_ns;
            out->acked_first = v.acked;
            sample_cpu(&cpu_first, &server_first, w);
            if (mem_pid > 0)
                out->rss_first_kib = ib__bench_proc_kib(mem_pid, "VmRSS");
        }
        if (v.done) {
            double cpu_done, server_done;
            out->t_done_ns = now_ns;
            sample_cpu(&cpu_done, &server_done, w);
            if (out->t_done_ns > out->t_first_ns) {
                double wall = (double)(out->t_done_ns - out->t_first_ns) / 1e9;
                out->consumer_cpu = (cpu_done - cpu_first) / wall;
                out->server_cpu = (server_done - server_first) / wall;
            }
            if (mem_pid > 0) {
                out->rss_done_kib = ib__bench_proc_kib(mem_pid, "VmRSS");
                out->hwm_done_kib = ib__bench_proc_kib(mem_pid, "VmHWM");
            }
            break;
        }
        if (v.acked != last_acked) {
            last_acked = v.acked;
            last_progress = ib__bench_now_ms();
        } else if (ib__bench_now_ms() - last_progress > stall_ms) {
            return ib_error_set(err, IB_ERR_TIMEOUT,
                                "consumer %s/%s: no ack for %lld ms (%llu of %llu acked)", stream,
                                durable, (long long)stall_ms, (unsigned long long)v.acked,
                                (unsigned long long)total);
        }
        ib__bench_sleep_ms(poll_ms);
    }
    if (out->acked_first >= total || out->t_done_ns <= out->t_first_ns)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "consumer %s/%s: all %llu messages acked between two polls; use "
                            "more messages",
                            stream, durable, (unsigned long long)total);
    out->msgs_per_s =
        (double)(total - out->acked_first) * 1e9 / (double)(out->t_done_ns - out->t_first_ns);
    return IB_OK;
}

ib_status ib__bench_wait_pulling(jsCtx *js, const char *stream, const char *durable,
                                 int64_t timeout_ms, ib_error *err)
{
    int64_t deadline = ib__bench_now_ms() + timeout_ms;
    poll_view v;
    while (ib__bench_now_ms() < deadline) {
        ib_status st = poll_once(&v, js, stream, durable, 0, err);
        if (st != IB_OK)
            return st;
        if (v.waiting > 0)
            return IB_OK;
        ib__bench_sleep_ms(20);
    }
    return ib_error_set(err, IB_ERR_TIMEOUT,
                        "consumer %s/%s: no pull request after %lld ms (did the consumer start?)",
                        stream, durable, (long long)timeout_ms);
}
