/* SPDX-License-Identifier: Apache-2.0 */
/* The rolling-restart case's publisher, gap watcher and restart step
 * (chaos_roll.h). */
#include "chaos_roll.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chaos_common.h"
#include "ib_test.h"
#include "it_support.h"
#include "jetstream.h"

/* One publish waits this long for its ack before it is sent again. */
#define PUB_ACK_WAIT_MS 2000
/* A rolling step gives up on an election or a rejoin after this. */
#define STEP_DEADLINE_MS 60000

static void sleep_until_us(int64_t deadline_us)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    if (deadline_us <= now)
        return;
    int64_t left = deadline_us - now;
    struct timespec d = {.tv_sec = left / 1000000, .tv_nsec = (left % 1000000) * 1000};
    nanosleep(&d, NULL);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Publishes ids[i] (under `msg_id` when not NULL) until it is
 * acknowledged or the publisher is stopped; true once acknowledged. */
static bool publish_until_acked(chaos_pub *p, size_t i, const char *msg_id)
{
    int64_t t0 = it_now_ms();
    jsPubOptions o;
    jsPubOptions_Init(&o);
    o.MaxWait = PUB_ACK_WAIT_MS;
    for (bool first = true;; first = false) {
        if (!first) {
            if (atomic_load(&p->stop) && msg_id != NULL)
                return false;
            atomic_fetch_add(&p->retries, 1);
            it_sleep_ms(50);
        }
        char id[IB_ID_BUF_SIZE];
        natsMsg *m = NULL;
        ib_error err = {0};
        ib_bus_event ev = {.type = p->type,
                           .id = p->ids[i],
                           .prefix = "events",
                           .payload = p->payload,
                           .payload_len = strlen(p->payload),
                           .set_msg_id = true};
        if (ib_bus_event_msg(&m, id, sizeof(id), &ev, &err) != IB_OK)
            return false;
        if (msg_id != NULL)
            natsMsgHeader_Set(m, "Nats-Msg-Id", msg_id);
        jsPubAck *ack = NULL;
        natsStatus st = js_PublishMsg(&ack, p->js, m, &o, NULL);
        jsPubAck_Destroy(ack);
        natsMsg_Destroy(m);
        if (st == NATS_OK) {
            long long waited = it_now_ms() - t0;
            if (waited > atomic_load(&p->longest_wait))
                atomic_store(&p->longest_wait, waited);
            return true;
        }
    }
}

static void *pub_main(void *arg)
{
    chaos_pub *p = arg;
    int64_t next = now_us();
    for (size_t i = 0; i < p->cap && !atomic_load(&p->stop); i++) {
        sleep_until_us(next);
        /* An event already started is acknowledged before the thread
         * ends, so that ids[0..acked) is exact. */
        if (!publish_until_acked(p, i, NULL))
            break;
        atomic_store(&p->acked, i + 1);
        if (i >= 50 && chaos_rng_range(&p->rng, 0, 9) == 0) {
            size_t j = i - (size_t)chaos_rng_range(&p->rng, 1, 50);
            char again[64];
            snprintf(again, sizeof(again), "%s-again", p->ids[j]);
            if (publish_until_acked(p, j, again))
                atomic_fetch_add(&p->duplicates, 1);
        }
        int64_t now = now_us();
        next += p->interval_us;
        if (next < now)
            next = now; /* steady after a stall: no catching up in a burst */
    }
    return NULL;
}

bool chaos_pub_start(chaos_pub *p)
{
    atomic_store(&p->stop, false);
    atomic_store(&p->acked, 0);
    atomic_store(&p->duplicates, 0);
    atomic_store(&p->retries, 0);
    atomic_store(&p->longest_wait, 0);
    p->started = pthread_create(&p->thread, NULL, pub_main, p) == 0;
    return p->started;
}

size_t chaos_pub_stop(chaos_pub *p)
{
    if (p->started) {
        atomic_store(&p->stop, true);
        pthread_join(p->thread, NULL);
        p->started = false;
    }
    return atomic_load(&p->acked);
}

/* ---- gaps ----------------------------------------------------------------- */

static void gap_record(chaos_gaps *g, int64_t start, int64_t end)
{
    if (end - start >= CHAOS_GAP_MIN_MS && g->n < CHAOS_MAX_GAPS)
        g->gaps[g->n++] = (chaos_gap){start, end};
}

/* Complete lines added to the file at `f` since the last call. */
static size_t new_lines(FILE *f)
{
    char buf[65536];
    size_t got, lines = 0;
    clearerr(f);
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
        for (size_t i = 0; i < got; i++)
            lines += buf[i] == '\n';
    return lines;
}

static void *gaps_main(void *arg)
{
    chaos_gaps *g = arg;
    FILE *f = NULL;
    size_t lines = 0;
    int64_t start = it_now_ms(), raw_start = 0;
    while (!atomic_load(&g->stop)) {
        int64_t now = it_now_ms();
        if (f == NULL)
            f = fopen(g->path, "r");
        size_t more = f != NULL ? new_lines(f) : 0;
        lines += more;
        if (more > 0) {
            gap_record(g, start, now);
            if (raw_start != 0 && now - raw_start > g->raw_longest)
                g->raw_longest = now - raw_start;
            start = raw_start = now;
        } else if (lines >= atomic_load(g->offered)) {
            start = now; /* nothing waits: idle, not a gap */
        }
        it_sleep_ms(5);
    }
    int64_t now = it_now_ms();
    gap_record(g, start, now);
    if (raw_start != 0 && now - raw_start > g->raw_longest)
        g->raw_longest = now - raw_start;
    if (f != NULL)
        fclose(f);
    return NULL;
}

bool chaos_gaps_start(chaos_gaps *g, const char *path, const atomic_size_t *offered)
{
    snprintf(g->path, sizeof(g->path), "%s", path);
    g->offered = offered;
    atomic_store(&g->stop, false);
    g->n = 0;
    g->raw_longest = 0;
    g->started = pthread_create(&g->thread, NULL, gaps_main, g) == 0;
    return g->started;
}

void chaos_gaps_stop(chaos_gaps *g)
{
    if (!g->started)
        return;
    atomic_store(&g->stop, true);
    pthread_join(g->thread, NULL);
    g->started = false;
}

/* ---- one step of a rolling restart ------------------------------------------ */

/* The leader of group k: streams[k] for k < elect, else the consumer. */
static int group_leader(it_cluster *c, const char *const *streams, int elect, const char *durable,
                        int k)
{
    return k < elect ? it_cluster_stream_leader(c, streams[k])
                     : it_cluster_consumer_leader(c, streams[0], durable);
}

/* Marks in s->group_ms each led group that has a leader on a running
 * node now; true when none is left waiting. */
static bool elected(chaos_roll_step *s, it_cluster *c, const char *const *streams, int elect,
                    const char *durable)
{
    bool all = true;
    for (int k = 0; k <= elect; k++) {
        if (s->group_ms[k] >= 0)
            continue;
        int l = group_leader(c, streams, elect, durable, k);
        if (l >= 0 && it_proc_running(&c->node[l].proc))
            s->group_ms[k] = (long)(it_now_ms() - s->stopped_at);
        else
            all = false;
    }
    return all;
}

void chaos_roll_node(chaos_roll_step *s, it_cluster *c, const char *const *streams, int nstreams,
                     int elect, const char *durable)
{
    assert_true(elect >= 1 && elect < CHAOS_ROLL_GROUPS && elect <= nstreams);
    s->led = 0;
    for (int k = 0; k < CHAOS_ROLL_GROUPS; k++) {
        bool led = k <= elect && group_leader(c, streams, elect, durable, k) == s->node;
        s->group_ms[k] = led ? -1 : 0;
        s->led += led;
    }
    s->stopped_at = it_now_ms();
    s->stop_status = s->sig == SIGKILL ? (it_cluster_kill(c, s->node) ? -SIGKILL : -1)
                                       : it_cluster_stop(c, s->node);
    s->election_ms = s->led == 0 ? 0 : -1;
    bool down = true;
    int64_t deadline = s->stopped_at + it_timeout(STEP_DEADLINE_MS);
    while ((down || s->election_ms < 0) && it_now_ms() < deadline) {
        if (s->election_ms < 0 && elected(s, c, streams, elect, durable))
            s->election_ms = (long)(it_now_ms() - s->stopped_at);
        if (down && it_now_ms() - s->stopped_at >= s->down_ms) {
            assert_true(it_cluster_restart(c, s->node));
            down = false;
        }
        it_sleep_ms(20);
    }
    s->current = true;
    for (int k = 0; k < nstreams; k++)
        s->current = s->current && it_cluster_wait_current(c, streams[k], it_timeout(60000));
}
