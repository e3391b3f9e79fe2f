/* SPDX-License-Identifier: Apache-2.0 */
/* The chaos test of the crash-safety promise: after crashes, restarts,
 * redeliveries and a recorder that cannot write, every valid event's
 * handler runs, and runs once outside a bounded window per crash.
 *
 * Per seed: one nats-server, several `ibus run` processes on one durable
 * and one SQLite marker file, the scripted plugin with a slow handler
 * (payload sleep:T) that appends one line per call to effects.log, and a
 * backlog published before the subscribers start, with 10 % duplicates
 * (half of them sent at the same moment by a second publisher). While the
 * backlog drains: kill -9 of a random subscriber at random moments, each
 * restarted after a short delay; nats-server restarts; and a recorder
 * outage, in which the LD_PRELOAD shim (enospc_shim.c) fails every write
 * and sync on the marker files with ENOSPC while a flag file exists.
 *
 * Two more disruptions join the kills where a case asks for them: a few
 * crashing events, whose handler aborts the process (payload crash; the
 * supervisor restarts it, as after a kill), and SIGSTOP of a subscriber
 * for longer than two AckWaits, so its leases end and its claims are
 * taken over, then SIGCONT (docs/design.md, "What a claim promises").
 *
 * The moments are chosen as fractions of the backlog handled (read from
 * effects.log), so every action lands while there is work in flight,
 * whatever the speed of the machine; a small random delay on top makes
 * the moment within a handler call random too.
 *
 * Counted from effects.log and the dead-letter stream: lost events (ids
 * without an ok line), dead letters (every event published but the
 * crashing ones is valid, so each one counts; a crashing event must be
 * dead-lettered once, after at most --max-deliver + 1 crashes), and
 * repeated side effects (ok lines beyond the first per consumer and id).
 * Each repeat is charged to what happened, after the call it repeats, to
 * the process that made that call (charge_repeat; effects.log names the
 * process of each call): a kill and a crash may cause repeats only within
 * repeat_bound_per_kill(), a pause within repeat_bound_per_pause().
 *
 * The flap cases (issue 31) use the http case's endpoint and make it flap:
 * while a flag file exists it answers 503 to everything (a downstream
 * outage, each longer than the whole retry budget --retry-delay 200ms
 * leaves), at random moments of the backlog, between kill -9 of hosts.
 * The circuits must keep every event out of the dead-letter stream.
 *
 * The fleet cases run the same on a 3-node cluster (it_cluster.h): five
 * hosts given every node's URL, the kv: recorder on a 3-replica bucket
 * instead of SQLite (so no shim and no outage), and in place of the
 * server restart a kill -9 of the node leading the bucket's stream,
 * restarted after leader_down_ms.
 *
 * The rolling-restart case (fleet_roll) keeps the fleet's cluster and
 * recorder but has no backlog and kills no host: a steady publisher
 * (chaos_roll.c) runs while each node in turn is stopped with SIGTERM,
 * kept down a few seconds and started again, as a StatefulSet's rolling
 * update does, then the same with kill -9. The event and dead-letter
 * streams are made by `ibus run --create --stream-replicas 3`. Besides
 * the counts above it measures every stretch with nothing handled against
 * the cluster's own leader election in the same step.
 *
 * Every parameter has a default per test case and can be changed through
 * the environment (IB_CHAOS_SEEDS="1,2,3", IB_CHAOS_EVENTS, ...; see
 * params_from_env). Each seed prints a row; with IB_CHAOS_REPORT=FILE the
 * rows are also appended to FILE as JSON lines. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chaos_common.h"
#include "chaos_roll.h"
#include "ib_test.h"
#include "it_cluster.h"
#include "it_support.h"

#define DURABLE "chaos"
#define DLQ_STREAM "DLQ_" DURABLE
/* The handler whose calls are counted: "other" runs on test.other and
 * follows the payload; one handler per event keeps one line per effect. */
#define EVENT_TYPE "test.other"
#define CONSUMER DURABLE "/scripted/other"
/* The http case's handler (the http plugin) and its endpoint. */
#define HTTP_CONSUMER DURABLE "/http/http"
#define HTTP_EFFECTS_PY CHAOS_SOURCE_DIR "/http_effects.py"
#define MAX_SUBSCRIBERS 16
#define MAX_SEEDS 64
#define MAX_ACTIONS 256
#define MAX_CRASH_EVENTS 16
/* `ibus run`'s default --batch, the crash window of a host that commits
 * marks once per batch. */
#define DEFAULT_BATCH 64
/* How long the backlog may make no progress outside an outage before the
 * remaining actions fire anyway (the backlog is gone, or stuck). */
#define STALL_MS 3000
/* The fleet cases' marker bucket (stream "KV_" FLEET_BUCKET), made with
 * three replicas by the first host, which `--create` runs alone. */
#define FLEET_BUCKET "fleet"
#define FLEET_RECORDER "--recorder=kv:" FLEET_BUCKET "?replicas=3&create=1"

typedef struct chaos_params {
    const char *name;
    const char *default_seeds;
    unsigned long seeds[MAX_SEEDS];
    size_t seed_count;
    long events;          /* unique events; 10 % more are published as duplicates */
    int subscribers;      /* `ibus run` processes */
    int kills;            /* kill -9 per seed */
    int restarts;         /* nats-server restarts per seed */
    long sleep_ms;        /* handler time t */
    long outage_ms;       /* flag file present this long (0: no outage) */
    long respawn_ms;      /* a killed subscriber comes back after this */
    long settle_ms;       /* deadline for the consumer to become idle */
    int concurrency;      /* --concurrency C (passed only when not 1) */
    double commit_ms;     /* I: commit interval the bound assumes */
    char commit_flag[32]; /* value for --commit-interval; "" when unsupported */
    char ack_wait[32];    /* value for --ack-wait; "" keeps the default */
    bool fleet;           /* 3-node cluster and the kv: recorder, not SQLite */
    int leader_kills;     /* kill -9 of the KV stream's leader node per seed */
    long leader_down_ms;  /* that node comes back after this */
    bool roll;            /* rolling restart under a steady publisher */
    long rate;            /* roll: events per second */
    long down_min_ms;     /* roll: a node stays down this long, up to */
    long down_max_ms;
    long steady_ms;                /* roll: handling between two steps */
    bool http;                     /* the http plugin POSTs to http_effects.py, the side effect */
    int flaps;                     /* http: times the endpoint goes down (503) per seed */
    long flap_min_ms, flap_max_ms; /* how long each time, up to */
    const char *default_ack_wait;  /* --ack-wait unless IB_CHAOS_ACK_WAIT is set; NULL: none */
    int crash_events;              /* events whose handler aborts the process (scripted only) */
    int pauses;                    /* SIGSTOP of a subscriber past 2 x AckWait, per seed */
    long max_deliver;              /* `ibus run`'s default --max-deliver (from --help) */
} chaos_params;

/* The rolling restart: each node with SIGTERM, then each with kill -9,
 * from the highest ordinal down, as a StatefulSet updates its pods. */
#define ROLL_STEPS (2 * IT_CLUSTER_NODES)
/* The bound: no stretch with nothing handled may be longer than
 * the step's leader election plus this. */
#define ROLL_GAP_SLACK_MS 2000

typedef struct chaos_result {
    unsigned long seed;
    int kills, kills_in_backlog, restarts, leader_kills, unplanned_exits, flaps;
    int crashes, pauses, pauses_in_backlog;
    size_t lost, dead_lettered, dl_never_handled, repeats, unexpected;
    /* repeats charged to kills (and to nothing else), crashes and pauses */
    size_t repeats_kill, repeats_crash, repeats_pause, pause_repeats_max;
    /* crashing events: dead letters of them, those not dead-lettered once,
     * the most crashes of one, crash lines against SIGABRT exits */
    size_t crash_dead_lettered, crash_not_once, crash_lines;
    long crash_most;
    double bound, pause_bound;
    long pause_ms;
    bool settled;
    int64_t elapsed_ms;
    /* roll */
    size_t published, duplicates_sent, pub_retries;
    long longest_gap_ms, raw_gap_ms, longest_election_ms, gaps_over;
    bool uncurrent;
} chaos_result;

/* ---- parameters ---------------------------------------------------------- */

/* Milliseconds of a duration as `ibus` prints it ("2ms", "500us", "1s"). */
static double duration_ms(const char *text)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text)
        return -1;
    if (strncmp(end, "us", 2) == 0)
        return v / 1000.0;
    if (strncmp(end, "ms", 2) == 0)
        return v;
    if (strncmp(end, "s", 1) == 0 || *end == '\0')
        return v * 1000.0;
    return -1;
}

/* The default `ibus run --help` gives for `option` ("[...; default X]",
 * on or after the line that starts with the option) in `out`; "" when the
 * help does not have it. */
static void help_default(char *out, size_t cap, char *const *texts, size_t n, const char *option)
{
    char line_start[64];
    snprintf(line_start, sizeof(line_start), "\n  %s ", option);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        /* The option's own line, not a mention of it in another's text. */
        const char *opt = texts[i] != NULL ? strstr(texts[i], line_start) : NULL;
        const char *def = opt != NULL ? strstr(opt, "default ") : NULL;
        if (def == NULL)
            continue;
        def += strlen("default ");
        snprintf(out, cap, "%.*s", (int)strcspn(def, "]\n "), def);
        return;
    }
}

/* Reads the defaults of --commit-interval and --max-deliver from `ibus run
 * --help`; leaves p->commit_flag empty when the binary has no such option. */
static void probe_commit_interval(chaos_params *p, const char *dir)
{
    it_argv a;
    it_proc help;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--help", NULL);
    int st = it_proc_run(&help, dir, "help", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    char *all[2] = {it_file_read(NULL, help.out_path), it_file_read(NULL, help.err_path)};
    char max_deliver[32];
    help_default(p->commit_flag, sizeof(p->commit_flag), all, st == 0 ? 2 : 0, "--commit-interval");
    help_default(max_deliver, sizeof(max_deliver), all, st == 0 ? 2 : 0, "--max-deliver");
    p->max_deliver = max_deliver[0] != '\0' ? strtol(max_deliver, NULL, 10) : 0;
    free(all[0]);
    free(all[1]);
    const char *override = getenv("IB_CHAOS_COMMIT_INTERVAL");
    if (p->commit_flag[0] != '\0' && override != NULL && override[0] != '\0')
        snprintf(p->commit_flag, sizeof(p->commit_flag), "%s", override);
    p->commit_ms = p->commit_flag[0] != '\0' ? duration_ms(p->commit_flag) : -1;
    if (p->commit_ms < 0) {
        /* No committer: marks are committed once per batch. */
        p->commit_flag[0] = '\0';
        p->commit_ms = (double)DEFAULT_BATCH * (double)p->sleep_ms;
    }
}

/* The case's defaults, then the environment's overrides:
 *   IB_CHAOS_SEEDS           comma-separated seeds ("1,2,3,4,5")
 *   IB_CHAOS_EVENTS          unique events in the backlog
 *   IB_CHAOS_SUBSCRIBERS     `ibus run` processes
 *   IB_CHAOS_KILLS           kill -9 per seed
 *   IB_CHAOS_SERVER_RESTARTS nats-server restarts per seed
 *   IB_CHAOS_SLEEP_MS        handler time t
 *   IB_CHAOS_OUTAGE_MS       recorder outage (0: none)
 *   IB_CHAOS_RESPAWN_MS      delay before a killed subscriber comes back
 *   IB_CHAOS_SETTLE_MS       deadline for the consumer to become idle
 *   IB_CHAOS_CONCURRENCY     --concurrency C (default 1, not passed)
 *   IB_CHAOS_COMMIT_INTERVAL --commit-interval, if the binary has it
 *   IB_CHAOS_ACK_WAIT        --ack-wait (default: the case's, or not passed)
 *   IB_CHAOS_CRASH_EVENTS    events whose handler aborts the process
 *   IB_CHAOS_PAUSES          SIGSTOP of a subscriber past 2 x AckWait
 *   IB_CHAOS_LEADER_KILLS    fleet: kill -9 of the bucket's leader node
 *   IB_CHAOS_LEADER_DOWN_MS  fleet: that node restarts after this
 *   IB_CHAOS_FLAPS           http: times the endpoint goes down per seed
 *   IB_CHAOS_REPORT          append one JSON line per seed to this file */
static void params_from_env(chaos_params *p, const char *dir)
{
    p->seed_count = chaos_seeds(p->seeds, MAX_SEEDS, p->default_seeds);
    p->events = chaos_env_long("IB_CHAOS_EVENTS", p->events);
    p->subscribers = (int)chaos_env_long("IB_CHAOS_SUBSCRIBERS", p->subscribers);
    p->kills = (int)chaos_env_long("IB_CHAOS_KILLS", p->kills);
    p->restarts = (int)chaos_env_long("IB_CHAOS_SERVER_RESTARTS", p->restarts);
    p->sleep_ms = chaos_env_long("IB_CHAOS_SLEEP_MS", p->sleep_ms);
    p->outage_ms = chaos_env_long("IB_CHAOS_OUTAGE_MS", p->outage_ms);
    p->respawn_ms = chaos_env_long("IB_CHAOS_RESPAWN_MS", p->respawn_ms);
    p->leader_kills = (int)chaos_env_long("IB_CHAOS_LEADER_KILLS", p->leader_kills);
    p->leader_down_ms = chaos_env_long("IB_CHAOS_LEADER_DOWN_MS", p->leader_down_ms);
    p->flaps = (int)chaos_env_long("IB_CHAOS_FLAPS", p->flaps);
    p->settle_ms = it_timeout(chaos_env_long("IB_CHAOS_SETTLE_MS", p->settle_ms));
    p->concurrency = (int)chaos_env_long("IB_CHAOS_CONCURRENCY", 1);
    p->crash_events = (int)chaos_env_long("IB_CHAOS_CRASH_EVENTS", p->crash_events);
    p->pauses = (int)chaos_env_long("IB_CHAOS_PAUSES", p->pauses);
    const char *ack_wait = getenv("IB_CHAOS_ACK_WAIT");
    if (ack_wait == NULL || ack_wait[0] == '\0')
        ack_wait = p->default_ack_wait;
    snprintf(p->ack_wait, sizeof(p->ack_wait), "%s", ack_wait != NULL ? ack_wait : "");
    if (p->events < 20 || p->subscribers < 1 || p->subscribers > MAX_SUBSCRIBERS ||
        p->sleep_ms < 1 || p->concurrency < 1)
        fail_msg("chaos %s: need >= 20 events, 1..%d subscribers, a handler of >= 1 ms and "
                 "concurrency >= 1",
                 p->name, MAX_SUBSCRIBERS);
    /* The crash verdict is the scripted plugin's. */
    if (p->crash_events > MAX_CRASH_EVENTS || (p->crash_events > 0 && (p->http || p->roll)) ||
        (p->pauses > 0 && p->roll))
        fail_msg("chaos %s: up to %d crashing events, with the scripted handler and a backlog; "
                 "pauses need a backlog",
                 p->name, MAX_CRASH_EVENTS);
    probe_commit_interval(p, dir);
}

/* The crash window docs/design.md promises. A kill repeats at most the
 * handlers running at that moment (C, one per handler thread) plus those
 * that finished within one commit interval and were not committed yet (C
 * threads finishing one handler per t: ceil(C * I / t)), plus one for a
 * handler that finishes on the edge of the interval. */
static double repeat_bound_per_kill(int concurrency, double commit_interval_ms, double handler_ms)
{
    double c = (double)concurrency;
    return c + ceil(c * commit_interval_ms / handler_ms) + 1.0;
}

/* A pause (SIGSTOP past two leases, then SIGCONT), from docs/design.md,
 * "What a claim promises", point 2: no call starts on a claim that may
 * have been taken over, so at most the calls running when the pause began
 * (C) repeat, plus the marks that waited for the commit interval when it
 * began (C threads finishing one call per t: ceil(C * I / t)). Unlike a
 * kill, a commit being written when the process stopped completes after
 * SIGCONT (it holds the marker file's write lock, so no claim of it can
 * be taken over meanwhile): no + 1. */
static double repeat_bound_per_pause(int concurrency, double commit_interval_ms, double handler_ms)
{
    double c = (double)concurrency;
    return c + ceil(c * commit_interval_ms / handler_ms);
}

/* A rolling restart kills no host: every handler that ran belongs to a
 * process that lives on, keeps its claim (renewed while the bucket has no
 * leader, for a lease of --ack-wait, 30 s, far beyond an election) and
 * retries its mark until it is durable (docs/design.md, "The crash window"). A
 * redelivery meanwhile finds the claim held and waits. So a node's stop
 * may repeat nothing. */
static double roll_or_crash_bound(const chaos_params *p)
{
    return p->roll ? 0.0 : repeat_bound_per_kill(p->concurrency, p->commit_ms, (double)p->sleep_ms);
}

/* ---- events -------------------------------------------------------------- */

typedef struct order_entry {
    double key;
    char *id;
} order_entry;

static int cmp_entry(const void *a, const void *b)
{
    double ka = ((const order_entry *)a)->key, kb = ((const order_entry *)b)->key;
    return ka < kb ? -1 : ka > kb;
}

/* Picks the crashing events among ids[0..n): in the backlog's first 80 %,
 * none twice; their indexes go to out[0..count). */
static void pick_crash_events(long *out, int count, size_t n, uint64_t *rng)
{
    for (int k = 0; k < count; k++) {
        bool again;
        do {
            out[k] = chaos_rng_range(rng, (long)n / 20, (long)n * 8 / 10);
            again = false;
            for (int j = 0; j < k; j++)
                again = again || out[j] == out[k];
        } while (again);
    }
}

static bool is_crash_event(const long *crash, int count, long idx)
{
    for (int k = 0; k < count; k++)
        if (crash[k] == idx)
            return true;
    return false;
}

/* Publisher A: every id once, and half of the duplicates a little later,
 * as a producer's retry would send them. Publisher B: the other half of
 * the duplicates, in A's order and from A's first ids, started at the same
 * moment as A, so the two copies land close together in the stream. The
 * crashing events (crash[0..crashes)) get the payload "crash" and no
 * duplicate, so each has one message to dead-letter. */
static void write_backlog(it_env *e, char *const *ids, size_t n, uint64_t *rng, const char *payload,
                          const long *crash, int crashes, char *a_path, char *b_path)
{
    size_t dups = n / 10, dups_b = dups / 2, dups_a = dups - dups_b;
    order_entry *a = calloc(n + dups_a, sizeof(*a));
    char **a_ids = calloc(n + dups_a, sizeof(char *));
    char **a_pay = calloc(n + dups_a, sizeof(char *));
    char **b_ids = calloc(dups_b + 1, sizeof(char *));
    char **b_pay = calloc(dups_b + 1, sizeof(char *));
    assert_true(a != NULL && a_ids != NULL && a_pay != NULL && b_ids != NULL && b_pay != NULL);
    for (size_t i = 0; i < n; i++)
        a[i] = (order_entry){(double)i, ids[i]};
    for (size_t k = 0; k < dups_a; k++) {
        size_t j;
        do
            j = (size_t)chaos_rng_range(rng, 0, (long)n - 1);
        while (is_crash_event(crash, crashes, (long)j));
        double later = (double)chaos_rng_range(rng, 1, 500);
        a[n + k] = (order_entry){(double)j + later + 0.5, ids[j]};
    }
    qsort(a, n + dups_a, sizeof(*a), cmp_entry);
    for (size_t i = 0; i < n + dups_a; i++) {
        a_ids[i] = a[i].id;
        bool bad = is_crash_event(crash, crashes, chaos_id_index(a[i].id, ids, n));
        a_pay[i] = (char *)(bad ? "crash" : payload);
    }
    size_t nb = 0;
    for (size_t i = 0; i < n && nb < dups_b; i++)
        if ((chaos_rng_next(rng) & 1) && !is_crash_event(crash, crashes, (long)i)) {
            b_pay[nb] = (char *)payload;
            b_ids[nb++] = ids[i];
        }
    assert_true(it_write_jsonl_each(it_path(a_path, e, "publish-a.jsonl"), a_ids, a_pay, n + dups_a,
                                    EVENT_TYPE));
    assert_true(
        it_write_jsonl_each(it_path(b_path, e, "publish-b.jsonl"), b_ids, b_pay, nb, EVENT_TYPE));
    free(a);
    free(a_ids);
    free(a_pay);
    free(b_ids);
    free(b_pay);
}

/* ---- processes ----------------------------------------------------------- */

typedef struct chaos_run {
    it_env *e;
    const chaos_params *p;
    chaos_result *r;
    uint64_t rng;
    char effects[PATH_MAX], flag[PATH_MAX], db[PATH_MAX];
    it_proc subs[MAX_SUBSCRIBERS];
    int64_t respawn_at[MAX_SUBSCRIBERS]; /* 0: running or never killed */
    int64_t spawned_at[MAX_SUBSCRIBERS];
    bool up[MAX_SUBSCRIBERS]; /* logged "running": connected and bound */
    it_cluster *cluster;      /* fleet cases; NULL on one nats-server */
    int node_down;            /* killed cluster node, -1: none */
    int64_t node_back_at;     /* when node_down restarts */
    long effect_lines;        /* complete lines of effects.log read so far */
    off_t effects_off;
    chaos_roll_step steps[ROLL_STEPS]; /* roll */
    long step_line[ROLL_STEPS];        /* effects.log lines before each step */
    size_t step_repeats[ROLL_STEPS];
    it_proc endpoint;                 /* http case: http_effects.py */
    char http_url[128];               /* http case: where it listens */
    char down[PATH_MAX];              /* flap cases: the endpoint answers 503 while it exists */
    int64_t flap_end;                 /* when the endpoint comes back; 0: it is up */
    int64_t up_until;                 /* no new flap before: the endpoint stays up a while */
    long crash_idx[MAX_CRASH_EVENTS]; /* the crashing events, indexes into ids */
    int paused;                       /* subscriber stopped by SIGSTOP; -1: none */
    int64_t pause_end;                /* when it gets SIGCONT */
    /* effects.log lines written before each kill, each pause and each
     * SIGCONT: where charge_repeat() places them */
    long kill_line[MAX_ACTIONS];
    long pause_from[MAX_ACTIONS], pause_to[MAX_ACTIONS];
    size_t pause_repeats[MAX_ACTIONS];
    /* the process each kill and each pause hit (effects.log names the
     * process of every call) */
    pid_t kill_pid[MAX_ACTIONS], pause_pid[MAX_ACTIONS];
} chaos_run;

/* The subscriber's command line: `env` puts the shim in front of ibus, so
 * the PID we kill is the ibus process itself (env execs it). */
static void subscriber_argv(it_argv *a, chaos_run *c, bool shim)
{
    it_argv run;
    char cfg[PATH_MAX + 8];
    it_argv_init(a);
    /* The fleet's markers are not in a file: nothing to fail. */
    if (shim && !c->p->fleet) {
        const char *pre = getenv("LD_PRELOAD");
        it_argv_add(a, "/usr/bin/env");
        if (pre != NULL && pre[0] != '\0')
            it_argv_addf(a, "LD_PRELOAD=%s:%s", CHAOS_SHIM, pre);
        else
            it_argv_addf(a, "LD_PRELOAD=%s", CHAOS_SHIM);
        it_argv_addf(a, "IB_SHIM_DB=%s", c->db);
        it_argv_addf(a, "IB_SHIM_FLAG=%s", c->flag);
        if (it_sanitized()) {
            /* The shim comes before the ASan runtime in the link order. */
            const char *asan = getenv("ASAN_OPTIONS");
            it_argv_addf(a, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", asan != NULL ? asan : "",
                         asan != NULL && asan[0] != '\0' ? ":" : "");
        }
    }
    it_argv_run(&run, c->e, DURABLE);
    for (size_t i = 0; c->p->fleet && i < run.n; i++)
        if (strncmp(run.v[i], "--recorder=", strlen("--recorder=")) == 0) {
            free(run.v[i]);
            run.v[i] = strdup(FLEET_RECORDER);
            assert_non_null(run.v[i]);
        }
    if (c->p->http) {
        snprintf(cfg, sizeof(cfg), "url=%s,types=" EVENT_TYPE ",timeout=10s", c->http_url);
        it_argv_plugin(&run, "http", cfg);
    } else {
        snprintf(cfg, sizeof(cfg), "file=%s", c->effects);
        it_argv_plugin(&run, "scripted", cfg);
    }
    it_argv_addl(&run, "--retry-delay", "200ms", NULL);
    if (c->p->concurrency != 1)
        it_argv_addf(&run, "--concurrency=%d", c->p->concurrency);
    if (c->p->commit_flag[0] != '\0')
        it_argv_addf(&run, "--commit-interval=%s", c->p->commit_flag);
    if (c->p->ack_wait[0] != '\0')
        it_argv_addf(&run, "--ack-wait=%s", c->p->ack_wait);
    if (c->p->roll)
        it_argv_addl(&run, "--stream-replicas", "3", NULL);
    for (size_t i = 0; i < run.n; i++)
        it_argv_add(a, run.v[i]);
    it_argv_free(&run);
}

static void spawn_subscriber(chaos_run *c, int i)
{
    it_argv a;
    char name[16];
    snprintf(name, sizeof(name), "sub%d", i + 1);
    subscriber_argv(&a, c, true);
    assert_true(it_spawn(&c->subs[i], c->e, name, &a));
    it_argv_free(&a);
    c->respawn_at[i] = 0;
    c->spawned_at[i] = it_now_ms();
    c->up[i] = false;
}

/* The fleet's event and dead-letter streams with 3 replicas, as a fleet
 * would deploy them, made before `ibus run --create` (which keeps existing
 * streams and makes missing ones with 1 replica): a stream on the killed
 * node alone would stop every host with it, which is not what the leader
 * kill is meant to test. */
static void create_fleet_streams(chaos_run *c)
{
    const char *names[2] = {IT_STREAM, DLQ_STREAM};
    const char *subjects[2] = {IT_SUBJECTS, "ibus.dlq." DURABLE};
    for (int i = 0; i < 2; i++) {
        jsStreamConfig cfg;
        jsStreamConfig_Init(&cfg);
        cfg.Name = names[i];
        cfg.Subjects = &subjects[i];
        cfg.SubjectsLen = 1;
        cfg.Storage = js_FileStorage;
        cfg.Replicas = 3;
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        natsStatus st = js_AddStream(&si, it_cluster_js(c->cluster), &cfg, NULL, &jerr);
        if (st != NATS_OK)
            fail_msg("create stream %s: %s (jetstream error %d)", names[i], natsStatus_GetText(st),
                     (int)jerr);
        jsStreamInfo_Destroy(si);
    }
}

/* `ibus run --create` once, without a backlog, then SIGTERM: the stream,
 * the dead-letter stream and the durable exist as the product makes them
 * before the backlog is published. */
static void create_consumer(chaos_run *c)
{
    it_argv a;
    it_proc p;
    subscriber_argv(&a, c, false);
    assert_true(it_spawn(&p, c->e, "create", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&c->e->server, IT_STREAM, DURABLE, it_timeout(30000)));
    /* the consumer exists before the run is bound (a kv: bucket binds
     * after it), and a stop before it is bound exits 1: wait for it */
    int64_t spawned = it_now_ms();
    while (!chaos_subscriber_up(&p, spawned))
        it_sleep_ms(20);
    assert_int_equal(it_proc_stop(&p, SIGTERM, it_timeout(30000)), 0);
}

/* A pause lasts two and a half of the consumer's AckWait, as created: a
 * live holder keeps an ended lease for one more lease, and the half gives
 * a redelivery time to take the claims over before SIGCONT. */
static void set_pause(chaos_run *c)
{
    it_consumer_state st;
    if (c->p->pauses == 0)
        return;
    assert_true(it_consumer_get(&st, &c->e->server, IT_STREAM, DURABLE));
    c->r->pause_ms = (long)(st.ack_wait_ms * 5 / 2);
}

static void publish_backlog(chaos_run *c, const char *a_path, const char *b_path)
{
    it_proc pub[2];
    it_published pa, pb;
    assert_true(it_publish_start(&pub[0], c->e, "publish-a", a_path, NULL));
    assert_true(it_publish_start(&pub[1], c->e, "publish-b", b_path, NULL));
    assert_int_equal(it_proc_wait(&pub[0], it_timeout(300000)), 0);
    assert_int_equal(it_proc_wait(&pub[1], it_timeout(300000)), 0);
    assert_true(it_published_read(&pa, &pub[0]));
    assert_true(it_published_read(&pb, &pub[1]));
    assert_int_equal(pa.failed + pb.failed, 0);
    assert_int_equal(it_stream_count(&c->e->server, IT_STREAM), pa.published + pb.published);
}

/* ---- the chaos ------------------------------------------------------------ */

/* Complete lines appended to effects.log since the last call, added to
 * c->effect_lines; reads only the new bytes. */
static long effects_progress(chaos_run *c)
{
    FILE *f = fopen(c->effects, "r");
    if (f == NULL)
        return c->effect_lines;
    char buf[65536];
    if (fseeko(f, c->effects_off, SEEK_SET) == 0) {
        size_t got;
        while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
            size_t last_nl = 0;
            bool any = false;
            for (size_t i = 0; i < got; i++)
                if (buf[i] == '\n') {
                    c->effect_lines++;
                    last_nl = i + 1;
                    any = true;
                }
            /* Keep a partial last line for the next call. */
            c->effects_off += any ? (off_t)last_nl : 0;
            if (!any || last_nl < got)
                break;
        }
    }
    fclose(f);
    return c->effect_lines;
}

typedef enum action_kind {
    ACT_KILL,
    ACT_SERVER_RESTART,
    ACT_OUTAGE,
    ACT_LEADER_KILL,
    ACT_FLAP,
    ACT_PAUSE
} action_kind;

typedef struct action {
    action_kind kind;
    double at;      /* fraction of the backlog handled */
    int64_t jitter; /* extra ms after the fraction is reached */
} action;

static int cmp_action(const void *a, const void *b)
{
    double x = ((const action *)a)->at, y = ((const action *)b)->at;
    return x < y ? -1 : x > y;
}

/* Kills anywhere in the backlog's first 80 %, restarts in its middle, the
 * outage early enough that a backlog remains behind it. */
static size_t plan_actions(action *out, chaos_run *c)
{
    const chaos_params *p = c->p;
    size_t n = 0;
    for (int i = 0; i < p->kills; i++)
        out[n++] = (action){ACT_KILL, 0.03 + 0.77 * chaos_rng_unit(&c->rng),
                            chaos_rng_range(&c->rng, 0, 40)};
    for (int i = 0; i < p->restarts; i++)
        out[n++] = (action){ACT_SERVER_RESTART, 0.15 + 0.6 * chaos_rng_unit(&c->rng),
                            chaos_rng_range(&c->rng, 0, 40)};
    for (int i = 0; i < p->leader_kills; i++)
        out[n++] = (action){ACT_LEADER_KILL, 0.15 + 0.6 * chaos_rng_unit(&c->rng),
                            chaos_rng_range(&c->rng, 0, 40)};
    if (p->outage_ms > 0)
        out[n++] = (action){ACT_OUTAGE, 0.1 + 0.4 * chaos_rng_unit(&c->rng),
                            chaos_rng_range(&c->rng, 0, 40)};
    for (int i = 0; i < p->flaps; i++)
        out[n++] = (action){ACT_FLAP, 0.05 + 0.8 * chaos_rng_unit(&c->rng),
                            chaos_rng_range(&c->rng, 0, 40)};
    for (int i = 0; i < p->pauses; i++)
        out[n++] = (action){ACT_PAUSE, 0.05 + 0.65 * chaos_rng_unit(&c->rng),
                            chaos_rng_range(&c->rng, 0, 40)};
    qsort(out, n, sizeof(*out), cmp_action);
    return n;
}

static bool kill_random(chaos_run *c, long progress)
{
    int running[MAX_SUBSCRIBERS], n = 0;
    for (int i = 0; i < c->p->subscribers; i++)
        if (c->respawn_at[i] == 0 && i != c->paused && it_proc_running(&c->subs[i]))
            running[n++] = i;
    if (n == 0)
        return false;
    int i = running[chaos_rng_range(&c->rng, 0, n - 1)];
    /* Work in flight just before the kill: messages not delivered yet or
     * awaiting an ack (the victim's own batch among them). */
    it_consumer_state st;
    bool known = it_consumer_get(&st, &c->e->server, IT_STREAM, DURABLE);
    c->kill_pid[c->r->kills] = c->subs[i].pid;
    assert_true(it_proc_signal(&c->subs[i], SIGKILL));
    int status = it_proc_wait(&c->subs[i], it_timeout(30000));
    if (status == -SIGABRT && c->p->crash_events > 0) {
        /* A crashing event's handler aborted it just before the kill
         * landed: that was a crash, which supervise() counts and
         * restarts; the kill waits for its next chance. */
        return false;
    }
    assert_int_equal(status, -SIGKILL);
    c->respawn_at[i] = it_now_ms() + c->p->respawn_ms;
    c->kill_line[c->r->kills++] = effects_progress(c);
    if (known && st.pending + st.ack_pending > 0)
        c->r->kills_in_backlog++;
    printf("  kill -9 %s after %ld of %ld effects (pending %" PRIu64 ", ack pending %" PRIu64 ")\n",
           c->subs[i].name, progress, c->p->events, known ? st.pending : 0,
           known ? st.ack_pending : 0);
    return true;
}

/* Waits until the kernel has stopped `pid` (state T in /proc/PID/stat),
 * so the effects.log lines counted next are all it wrote before the pause:
 * 'T' then, 'Z' when it died first (a crashing event may abort it at any
 * moment; it is then a zombie or gone, and restarted as a crash), or the
 * last state seen when the wait timed out. */
static char wait_stopped(pid_t pid, long timeout_ms)
{
    char path[64], buf[512], state = '?';
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int64_t end = it_now_ms() + timeout_ms;
    do {
        FILE *f = fopen(path, "r");
        if (f == NULL)
            return 'Z';
        size_t got = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[got] = '\0';
        const char *paren = strrchr(buf, ')');
        state = paren != NULL && paren[1] == ' ' ? paren[2] : '?';
        if (state == 'T' || state == 't')
            return 'T';
        if (state == 'Z' || state == 'X')
            return 'Z';
        it_sleep_ms(1);
    } while (it_now_ms() < end);
    return state;
}

/* SIGSTOP of a random running subscriber for the case's pause (past two
 * AckWaits: a live holder keeps an ended lease for one more lease); it
 * gets SIGCONT from supervise_pause(). One pause at a time; the other
 * actions go on meanwhile (a kill spares the stopped subscriber). */
static bool pause_random(chaos_run *c, long progress)
{
    int running[MAX_SUBSCRIBERS], n = 0;
    for (int i = 0; i < c->p->subscribers; i++)
        if (c->respawn_at[i] == 0 && c->up[i] && it_proc_running(&c->subs[i]))
            running[n++] = i;
    if (n == 0 || c->paused >= 0)
        return false;
    int i = running[chaos_rng_range(&c->rng, 0, n - 1)];
    it_consumer_state st;
    bool known = it_consumer_get(&st, &c->e->server, IT_STREAM, DURABLE);
    assert_true(it_proc_signal(&c->subs[i], SIGSTOP));
    char state = wait_stopped(c->subs[i].pid, it_timeout(15000));
    if (state == 'Z') /* it died meanwhile: no pause, and its end is a crash */
        return false;
    if (state != 'T')
        fail_msg("chaos: %s did not stop on SIGSTOP (its state stayed '%c')", c->subs[i].name,
                 state);
    int k = c->r->pauses++;
    c->pause_from[k] = effects_progress(c);
    c->pause_pid[k] = c->subs[i].pid;
    c->paused = i;
    c->pause_end = it_now_ms() + c->r->pause_ms;
    if (known && st.pending + st.ack_pending > 0)
        c->r->pauses_in_backlog++;
    printf("  SIGSTOP %s for %ld ms after %ld of %ld effects (pending %" PRIu64
           ", ack pending %" PRIu64 ")\n",
           c->subs[i].name, c->r->pause_ms, progress, c->p->events, known ? st.pending : 0,
           known ? st.ack_pending : 0);
    return true;
}

/* SIGCONT when the pause is over; true while a subscriber is stopped. */
static bool supervise_pause(chaos_run *c)
{
    if (c->paused < 0)
        return false;
    if (it_now_ms() < c->pause_end)
        return true;
    c->pause_to[c->r->pauses - 1] = effects_progress(c);
    assert_true(it_proc_signal(&c->subs[c->paused], SIGCONT));
    printf("  SIGCONT %s after %ld effects\n", c->subs[c->paused].name,
           c->pause_to[c->r->pauses - 1]);
    c->paused = -1;
    return false;
}

/* kill -9 of the cluster node that leads the marker bucket's stream right
 * now; it restarts leader_down_ms later (see supervise_node). Waits while
 * another node is still down: a second loss would stop the bucket. */
static bool kill_leader(chaos_run *c, long progress)
{
    if (c->node_down >= 0)
        return false;
    int leader = it_cluster_stream_leader(c->cluster, "KV_" FLEET_BUCKET);
    if (leader < 0)
        return false;
    assert_true(it_cluster_kill(c->cluster, leader));
    c->node_down = leader;
    c->node_back_at = it_now_ms() + c->p->leader_down_ms;
    c->r->leader_kills++;
    printf("  kill -9 of node %s, leader of KV_" FLEET_BUCKET ", after %ld of %ld effects\n",
           c->cluster->node[leader].name, progress, c->p->events);
    return true;
}

/* Restarts the killed node when its time comes; true while it is down. */
static bool supervise_node(chaos_run *c)
{
    if (c->node_down < 0)
        return false;
    if (it_now_ms() < c->node_back_at)
        return true;
    assert_true(it_cluster_restart(c->cluster, c->node_down));
    int leader = it_cluster_wait_leader(c->cluster, "KV_" FLEET_BUCKET, -1, it_timeout(30000));
    printf("  node %s restarted; KV_" FLEET_BUCKET " led by %s\n",
           c->cluster->node[c->node_down].name,
           leader >= 0 ? c->cluster->node[leader].name : "nobody");
    c->node_down = -1;
    return false;
}

/* Brings back subscribers whose respawn time came, and any that ended on
 * its own (as a supervisor would; counted as an unplanned exit). Returns
 * true while a respawn is due or a subscriber is still starting. */
static bool supervise(chaos_run *c)
{
    bool starting = false;
    for (int i = 0; i < c->p->subscribers; i++) {
        if (c->respawn_at[i] != 0) {
            /* Not while a cluster node is down: see fire(). */
            if (it_now_ms() >= c->respawn_at[i] && c->node_down < 0)
                spawn_subscriber(c, i);
        } else if (!it_proc_running(&c->subs[i])) {
            if (c->p->crash_events > 0 && c->subs[i].status == -SIGABRT) {
                /* A crashing event's handler: restarted at once, as a
                 * supervisor does. */
                c->r->crashes++;
                printf("  %s crashed (a handler aborted it); restarted\n", c->subs[i].name);
            } else {
                c->r->unplanned_exits++;
                chaos_report_exit(&c->subs[i]);
            }
            spawn_subscriber(c, i);
        }
        if (c->respawn_at[i] == 0 && !c->up[i])
            c->up[i] = chaos_subscriber_up(&c->subs[i], c->spawned_at[i]);
        starting = starting || c->respawn_at[i] != 0 || !c->up[i];
    }
    return starting;
}

static void flag_set(chaos_run *c, bool on)
{
    if (on)
        assert_true(it_file_write(c->flag, "outage\n", 7));
    else
        assert_true(unlink(c->flag) == 0 || errno == ENOENT);
}

/* The endpoint goes down for a random while; one flap at a time, each
 * after a random while up. */
static bool flap(chaos_run *c, long progress)
{
    if (c->flap_end != 0 || it_now_ms() < c->up_until)
        return false;
    long ms = chaos_rng_range(&c->rng, c->p->flap_min_ms, c->p->flap_max_ms);
    assert_true(it_file_write(c->down, "down\n", 5));
    c->flap_end = it_now_ms() + ms;
    c->r->flaps++;
    printf("  endpoint down (503) for %ld ms after %ld of %ld effects\n", ms, progress,
           c->p->events);
    return true;
}

/* Brings the endpoint back when its flap is over; true while it is down. */
static bool supervise_flap(chaos_run *c)
{
    if (c->flap_end == 0)
        return false;
    if (it_now_ms() < c->flap_end)
        return true;
    assert_true(unlink(c->down) == 0 || errno == ENOENT);
    c->flap_end = 0;
    c->up_until = it_now_ms() + chaos_rng_range(&c->rng, 1000, 4000);
    return false;
}

/* Fires one due action; returns false when it must wait. A server
 * restart waits until no subscriber is starting: one that cannot connect
 * at start exits 1 by design, which is not the failure looked for here.
 * The same holds for a leader kill, and supervise() starts no subscriber
 * while the node is down: a host started then cannot bind to the bucket
 * while it has no leader ("cannot bind to the bucket: Timeout") and exits
 * 1. Hosts already running must ride the outage out. */
static bool fire(chaos_run *c, action *a, long progress, bool starting, int64_t *outage_end)
{
    switch (a->kind) {
    case ACT_KILL:
        return kill_random(c, progress);
    case ACT_SERVER_RESTART:
        if (starting)
            return false;
        printf("  nats-server restart after %ld of %ld effects\n", progress, c->p->events);
        assert_true(it_server_restart(&c->e->server));
        c->r->restarts++;
        return true;
    case ACT_OUTAGE:
        printf("  recorder outage of %ld ms after %ld of %ld effects\n", c->p->outage_ms, progress,
               c->p->events);
        flag_set(c, true);
        *outage_end = it_now_ms() + c->p->outage_ms;
        return true;
    case ACT_LEADER_KILL:
        return !starting && kill_leader(c, progress);
    case ACT_FLAP:
        return flap(c, progress);
    case ACT_PAUSE:
        return pause_random(c, progress);
    }
    return true;
}

static void run_chaos(chaos_run *c)
{
    action plan[MAX_ACTIONS];
    if ((size_t)c->p->kills + (size_t)c->p->restarts + (size_t)c->p->flaps + (size_t)c->p->pauses +
            2 >
        sizeof(plan) / sizeof(plan[0]))
        fail_msg("chaos: too many kills and restarts");
    size_t n = plan_actions(plan, c), next = 0;
    int64_t outage_end = 0, last_move = it_now_ms(), reached_at = 0;
    long last_progress = -1;
    for (;;) {
        long progress = effects_progress(c);
        int64_t now = it_now_ms();
        if (progress != last_progress) {
            last_progress = progress;
            last_move = now;
        }
        if (outage_end != 0 && now >= outage_end) {
            flag_set(c, false);
            outage_end = 0;
            last_move = now;
        }
        bool starting = supervise(c);
        bool node_down = supervise_node(c);
        bool flapping = supervise_flap(c);
        bool pausing = supervise_pause(c);
        if (next == n && outage_end == 0 && !starting && !node_down && !flapping && !pausing)
            break;
        if (flapping)
            last_move = now; /* no progress is expected while the endpoint is down */
        bool stalled = outage_end == 0 && now - last_move >= STALL_MS;
        if (next < n && (progress >= (long)(plan[next].at * (double)c->p->events) || stalled)) {
            if (reached_at == 0)
                reached_at = now;
            if (now - reached_at >= plan[next].jitter &&
                fire(c, &plan[next], progress, starting, &outage_end)) {
                next++;
                reached_at = 0;
                last_move = it_now_ms();
            }
        }
        it_sleep_ms(2);
    }
}

/* ---- the rolling restart -------------------------------------------------- */

/* Supervises the hosts for `ms` (a host that ended on its own is restarted
 * and counted as an unplanned exit). */
static void roll_steady(chaos_run *c, long ms)
{
    int64_t end = it_now_ms() + ms;
    while (it_now_ms() < end) {
        supervise(c);
        it_sleep_ms(20);
    }
}

/* `--stream-replicas 3` made both streams with three replicas. */
static void check_stream_replicas(chaos_run *c)
{
    const char *names[2] = {IT_STREAM, DLQ_STREAM};
    for (int i = 0; i < 2; i++) {
        jsStreamInfo *si = NULL;
        assert_int_equal(js_GetStreamInfo(&si, it_cluster_js(c->cluster), names[i], NULL, NULL),
                         NATS_OK);
        assert_int_equal(si->Config->Replicas, 3);
        jsStreamInfo_Destroy(si);
    }
}

static void roll_cluster(chaos_run *c)
{
    /* The election counts on a valid event's path: its stream, the
     * bucket's and the consumer; the dead-letter stream is only waited
     * for until it is current. */
    const char *streams[3] = {IT_STREAM, "KV_" FLEET_BUCKET, DLQ_STREAM};
    for (int k = 0; k < ROLL_STEPS; k++) {
        chaos_roll_step *s = &c->steps[k];
        *s = (chaos_roll_step){.node = IT_CLUSTER_NODES - 1 - k % IT_CLUSTER_NODES,
                               .sig = k < IT_CLUSTER_NODES ? SIGTERM : SIGKILL,
                               .down_ms =
                                   chaos_rng_range(&c->rng, c->p->down_min_ms, c->p->down_max_ms)};
        c->step_line[k] = effects_progress(c);
        chaos_roll_node(s, c->cluster, streams, 3, 2, DURABLE);
        c->r->kills++;
        c->r->uncurrent = c->r->uncurrent || !s->current;
        printf("  %s of node %s after %ld effects: exit %d, down %ld ms, election %ld ms (led: "
               "stream %ld, bucket %ld, consumer %ld; 0 not led)%s\n",
               s->sig == SIGKILL ? "kill -9" : "SIGTERM", c->cluster->node[s->node].name,
               c->step_line[k], s->stop_status, s->down_ms, s->election_ms, s->group_ms[0],
               s->group_ms[1], s->group_ms[2],
               s->current ? "" : ", replicas not current afterwards");
        fflush(stdout);
        if (s->election_ms < 0)
            c->r->gaps_over++; /* no leader within the step's deadline */
        if (s->election_ms > c->r->longest_election_ms)
            c->r->longest_election_ms = s->election_ms;
        roll_steady(c, c->p->steady_ms);
    }
}

/* The wall-clock time of `at` (it_now_ms), "HH:MM:SS.mmm", to find a gap
 * in the hosts' logs; a static buffer. */
static const char *wall_clock(int64_t at)
{
    static char out[32];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - (it_now_ms() - at);
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(out, sizeof(out), "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(ms % 1000));
    return out;
}

/* Each stretch with nothing handled against the bound of the step before
 * it: that step's election plus ROLL_GAP_SLACK_MS (before the first step:
 * the slack alone). */
static void judge_gaps(chaos_run *c, const chaos_gaps *g)
{
    long longest[ROLL_STEPS + 1] = {0};
    for (size_t i = 0; i < g->n; i++) {
        int k = -1;
        for (int s = 0; s < ROLL_STEPS; s++)
            if (c->steps[s].stopped_at != 0 && c->steps[s].stopped_at <= g->gaps[i].end)
                k = s;
        long len = (long)(g->gaps[i].end - g->gaps[i].start);
        long bound = (k >= 0 ? c->steps[k].election_ms : 0) + ROLL_GAP_SLACK_MS;
        if (len > c->r->longest_gap_ms)
            c->r->longest_gap_ms = len;
        if (len > longest[k + 1])
            longest[k + 1] = len;
        c->r->gaps_over += len > bound;
        if (len > bound || len >= ROLL_GAP_SLACK_MS / 2)
            printf("  nothing handled for %ld ms from %ld ms after step %d's signal (bound %ld "
                   "ms%s; at %s UTC)\n",
                   len, k >= 0 ? (long)(g->gaps[i].start - c->steps[k].stopped_at) : 0, k + 1,
                   bound, len > bound ? ", OVER" : "", wall_clock(g->gaps[i].start));
    }
    for (int s = 0; s < ROLL_STEPS; s++)
        printf("  step %d (%s %s): election %ld ms, longest gap %ld ms, repeats %zu\n", s + 1,
               c->steps[s].sig == SIGKILL ? "kill -9" : "SIGTERM",
               c->cluster->node[c->steps[s].node].name, c->steps[s].election_ms, longest[s + 1],
               c->step_repeats[s]);
}

/* Hosts up, then the steady publisher, the roll, and a steady stretch at
 * the end; returns how many of ids[0..cap) were published. */
static size_t run_roll(chaos_run *c, char *const *ids, size_t cap)
{
    for (int i = 0; i < c->p->subscribers; i++)
        spawn_subscriber(c, i);
    int64_t deadline = it_now_ms() + it_timeout(60000);
    while (supervise(c) && it_now_ms() < deadline)
        it_sleep_ms(20);
    chaos_pub pub = {.js = it_cluster_js(c->cluster),
                     .ids = ids,
                     .cap = cap,
                     .type = EVENT_TYPE,
                     .payload = "sleep:1",
                     .interval_us = 1000000 / c->p->rate,
                     .rng = c->rng ^ 0x9e3779b97f4a7c15ull};
    static chaos_gaps gaps; /* large: kept off the stack */
    assert_true(chaos_pub_start(&pub));
    assert_true(chaos_gaps_start(&gaps, c->effects, &pub.acked));
    roll_steady(c, c->p->steady_ms);
    roll_cluster(c);
    roll_steady(c, c->p->steady_ms);
    chaos_gaps_stop(&gaps);
    size_t n = chaos_pub_stop(&pub);
    c->r->published = n;
    c->r->duplicates_sent = atomic_load(&pub.duplicates);
    c->r->pub_retries = atomic_load(&pub.retries);
    c->r->raw_gap_ms = (long)gaps.raw_longest;
    printf("  published %zu events and %zu duplicates at %ld/s (%zu sent again, longest ack wait "
           "%lld ms)\n",
           n, c->r->duplicates_sent, c->p->rate, c->r->pub_retries,
           (long long)atomic_load(&pub.longest_wait));
    if (n == cap)
        fail_msg("chaos %s: the publisher ran out of ids: raise events", c->p->name);
    judge_gaps(c, &gaps);
    return n;
}

/* ---- counting ------------------------------------------------------------- */

/* Dead letters by their Ibus-Reason header, e.g. "max-deliver 805". */
static void print_reasons(const it_msg *dl, size_t n)
{
    const char *reasons[8];
    size_t counts[8], kinds = 0;
    for (size_t i = 0; i < n; i++) {
        const char *r = it_msg_header(&dl[i], "Ibus-Reason");
        r = r != NULL ? r : "?";
        size_t k = 0;
        while (k < kinds && strcmp(reasons[k], r) != 0)
            k++;
        if (k == kinds && kinds < 8) {
            reasons[kinds] = r;
            counts[kinds++] = 0;
        }
        if (k < kinds)
            counts[k]++;
    }
    if (kinds > 0)
        printf("  dead letters by reason:");
    for (size_t k = 0; k < kinds; k++)
        printf(" %s %zu", reasons[k], counts[k]);
    if (kinds > 0)
        printf("\n");
}

/* A repeated effect on line `line` of effects.log; in a roll, charged to
 * the step that came before it. */
static void count_repeat(chaos_run *c, long line)
{
    c->r->repeats++;
    int k = -1;
    for (int s = 0; c->p->roll && s < ROLL_STEPS; s++)
        if (c->steps[s].stopped_at != 0 && c->step_line[s] <= line)
            k = s;
    if (k >= 0)
        c->step_repeats[k]++;
}

/* One call of effects.log: its line and the process that made it (0:
 * not named). */
typedef struct effect_at {
    long line;
    pid_t pid;
} effect_at;

/* Charges a repeat to the earliest of a pause (number `pause`, begun at
 * line `paused`; -1 for none), a crash and a kill (LONG_MAX: none): false,
 * with nothing charged, when none of them happened. */
static bool charge_earliest(chaos_run *c, int pause, long paused, long crashed, long killed)
{
    if (pause >= 0 && paused <= killed && paused <= crashed) {
        c->pause_repeats[pause]++;
        c->r->repeats_pause++;
    } else if (crashed < killed) {
        c->r->repeats_crash++;
    } else if (killed < LONG_MAX) {
        c->r->repeats_kill++;
    } else {
        return false;
    }
    return true;
}

/* Where a repeat is charged when the processes of the calls are not
 * known (the http case's effects name none). `prev` is the line of the
 * call it repeats (the previous ok line of its id); crash[0..ncrash)
 * the crashes, in order. A line written while a subscriber
 * was stopped that is repeated later may be a call another process took
 * over (the stopped one finishes its own after SIGCONT): the pause's,
 * unless a kill or a crash comes after it within the pause. Otherwise the
 * repeat belongs to the first kill, crash or pause that came after the
 * call; with none after it, it is charged to the kills, as every repeat
 * was before crashes and pauses joined them (a run without kills may
 * repeat nothing). */
static void charge_by_lines(chaos_run *c, long prev, const effect_at *crash, size_t ncrash)
{
    long first_crash = LONG_MAX, first_kill = LONG_MAX;
    for (size_t k = 0; k < ncrash && first_crash == LONG_MAX; k++)
        if (crash[k].line > prev)
            first_crash = crash[k].line;
    for (int k = 0; k < c->r->kills && first_kill == LONG_MAX; k++)
        if (c->kill_line[k] > prev)
            first_kill = c->kill_line[k];
    for (int k = 0; k < c->r->pauses; k++)
        if (prev >= c->pause_from[k] && prev < c->pause_to[k] && first_crash >= c->pause_to[k] &&
            first_kill >= c->pause_to[k]) {
            c->pause_repeats[k]++;
            c->r->repeats_pause++;
            return;
        }
    long first_pause = LONG_MAX;
    int pause = -1;
    for (int k = 0; k < c->r->pauses && pause < 0; k++)
        if (c->pause_from[k] > prev) {
            first_pause = c->pause_from[k];
            pause = k;
        }
    if (!charge_earliest(c, pause, first_pause, first_crash, first_kill))
        c->r->repeats_kill++;
}

/* Where a repeat is charged when effects.log names the process of each
 * call: `prev` is the call it repeats, `again` the repeat, crash[0..ncrash)
 * the crash lines. A call repeats because the process that made it lost
 * its mark, so the repeat is charged to the first thing that happened to
 * that process after the call: its kill, its crash or its pause (whose
 * pending marks another process then made again). One case is the other
 * way round: a stopped process that finishes, after SIGCONT, the call it
 * was in when stopped repeats a call another process made during the
 * pause; that is the pause's. With neither, the lines decide
 * (charge_by_lines). Charging by process matters when a process stops
 * while it holds the marker file's write turn: the others cannot commit
 * for the whole pause, and a kill of one of them then repeats calls made
 * during the pause that the lines alone would charge to it. */
static void charge_repeat(chaos_run *c, effect_at prev, effect_at again, const effect_at *crash,
                          size_t ncrash)
{
    if (prev.pid == 0 || again.pid == 0) {
        charge_by_lines(c, prev.line, crash, ncrash);
        return;
    }
    for (int k = 0; k < c->r->pauses; k++)
        if (again.pid == c->pause_pid[k] && prev.pid != again.pid &&
            prev.line >= c->pause_from[k] && prev.line < c->pause_to[k] &&
            again.line >= c->pause_to[k]) {
            c->pause_repeats[k]++;
            c->r->repeats_pause++;
            return;
        }
    long kill = LONG_MAX, crashed = LONG_MAX, paused = LONG_MAX;
    int pause = -1;
    for (int k = 0; k < c->r->kills; k++)
        if (c->kill_pid[k] == prev.pid && c->kill_line[k] > prev.line && c->kill_line[k] < kill)
            kill = c->kill_line[k];
    for (size_t k = 0; k < ncrash; k++)
        if (crash[k].pid == prev.pid && crash[k].line > prev.line && crash[k].line < crashed)
            crashed = crash[k].line;
    for (int k = 0; k < c->r->pauses; k++)
        if (c->pause_pid[k] == prev.pid && c->pause_from[k] > prev.line &&
            c->pause_from[k] < paused) {
            paused = c->pause_from[k];
            pause = k;
        }
    if (!charge_earliest(c, pause, paused, crashed, kill))
        charge_by_lines(c, prev.line, crash, ncrash);
}

/* The pid that effects.log line `line` names, or 0. */
static pid_t line_pid(const char *line)
{
    char field[24];
    if (!it_field(field, sizeof(field), line, 5))
        return 0;
    char *end = NULL;
    long v = strtol(field, &end, 10);
    return end != field && *end == '\0' && v > 0 ? (pid_t)v : 0;
}

/* What the crashing events came to: each must be dead-lettered once,
 * after at most --max-deliver + 1 crashes (docs/design.md, "What a claim
 * promises", point 1), and none may have an ok line. */
static void count_crash_events(chaos_run *c, const unsigned *crash_lines, const unsigned *dl,
                               const unsigned *ok)
{
    for (int k = 0; k < c->p->crash_events; k++) {
        long idx = c->crash_idx[k];
        c->r->crash_dead_lettered += dl[idx];
        c->r->crash_not_once += dl[idx] != 1 || ok[idx] != 0;
        if ((long)crash_lines[idx] > c->r->crash_most)
            c->r->crash_most = (long)crash_lines[idx];
        printf("  crashing event %ld: %u crashes, dead-lettered %u time(s)\n", idx,
               crash_lines[idx], dl[idx]);
    }
}

/* Dead letters: those of crashing events apart, every other one is a
 * valid event dead-lettered. */
static void count_dead_letters(chaos_run *c, char *const *ids, size_t n, const unsigned *ok,
                               const unsigned *crash_lines)
{
    unsigned *dl = calloc(n, sizeof(unsigned));
    assert_non_null(dl);
    it_msg *msgs = NULL;
    size_t nd = it_stream_read_all(&msgs, &c->e->server, DLQ_STREAM);
    for (size_t i = 0; i < nd; i++) {
        const char *id = it_msg_header(&msgs[i], "Ibus-Event-Id");
        long idx = id != NULL ? chaos_id_index(id, ids, n) : -1;
        if (idx >= 0 && is_crash_event(c->crash_idx, c->p->crash_events, idx)) {
            dl[idx]++;
            continue;
        }
        c->r->dead_lettered++;
        if (idx < 0 || ok[idx] == 0)
            c->r->dl_never_handled++;
    }
    print_reasons(msgs, nd);
    it_msgs_free(msgs, nd);
    count_crash_events(c, crash_lines, dl, ok);
    free(dl);
}

static void count_effects(chaos_run *c, char *const *ids, size_t n)
{
    unsigned *ok = calloc(n, sizeof(unsigned)), *crash_lines = calloc(n, sizeof(unsigned));
    effect_at *last_ok = calloc(n, sizeof(effect_at));
    char **lines = NULL;
    size_t nl = it_file_read_lines(&lines, c->effects), ncrash = 0;
    effect_at *crash = calloc(nl + 1, sizeof(effect_at));
    assert_true(ok != NULL && crash_lines != NULL && last_ok != NULL && crash != NULL);
    const char *consumer_want = c->p->http ? HTTP_CONSUMER : CONSUMER;
    /* The crash lines first: a repeat is charged by what came after it. */
    for (size_t i = 0; i < nl; i++) {
        char consumer[128], id[64], verdict[16];
        if (!it_field(consumer, sizeof(consumer), lines[i], 0) ||
            !it_field(id, sizeof(id), lines[i], 1) ||
            !it_field(verdict, sizeof(verdict), lines[i], 4) ||
            strcmp(consumer, consumer_want) != 0)
            continue;
        long idx = chaos_id_index(id, ids, n);
        if (strcmp(verdict, "crash") == 0 && idx >= 0) {
            crash_lines[idx]++;
            crash[ncrash++] = (effect_at){(long)i, line_pid(lines[i])};
        }
    }
    c->r->crash_lines = ncrash;
    for (size_t i = 0; i < nl; i++) {
        char consumer[128], id[64], verdict[16];
        if (!it_field(consumer, sizeof(consumer), lines[i], 0) ||
            !it_field(id, sizeof(id), lines[i], 1) ||
            !it_field(verdict, sizeof(verdict), lines[i], 4) ||
            strcmp(consumer, consumer_want) != 0 || strcmp(verdict, "ok") != 0)
            continue;
        long idx = chaos_id_index(id, ids, n);
        if (idx < 0) {
            c->r->unexpected++;
            continue;
        }
        effect_at here = {(long)i, line_pid(lines[i])};
        if (ok[idx]++ > 0) {
            count_repeat(c, (long)i);
            if (c->p->roll)
                c->r->repeats_kill++; /* a step's; judged per step */
            else
                charge_repeat(c, last_ok[idx], here, crash, ncrash);
        }
        last_ok[idx] = here;
    }
    for (size_t i = 0; i < n; i++)
        c->r->lost += ok[i] == 0 && !is_crash_event(c->crash_idx, c->p->crash_events, (long)i);
    for (int k = 0; k < c->r->pauses; k++)
        if (c->pause_repeats[k] > c->r->pause_repeats_max)
            c->r->pause_repeats_max = c->pause_repeats[k];
    it_lines_free(lines, nl);
    count_dead_letters(c, ids, n, ok, crash_lines);
    free(ok);
    free(crash_lines);
    free(last_ok);
    free(crash);
}

/* Waits for the consumer to be idle, restarting the subscribers that a
 * crashing event ends meanwhile, then stops them. A subscriber that does
 * not exit 0 on SIGTERM counts as an unplanned exit. */
static void settle(chaos_run *c)
{
    int64_t end = it_now_ms() + c->p->settle_ms;
    for (;;) {
        supervise(c);
        int64_t left = end - it_now_ms();
        if (left <= 2000) {
            c->r->settled = chaos_wait_idle(&c->e->server, DURABLE, left > 0 ? (long)left : 0);
            break;
        }
        it_consumer_state st;
        if (it_wait_consumer_idle(&st, &c->e->server, IT_STREAM, DURABLE, 2000)) {
            c->r->settled = true;
            break;
        }
    }
    c->r->unplanned_exits += chaos_stop_all(c->subs, c->p->subscribers);
}

/* ---- one seed --------------------------------------------------------------- */

/* One nats-server, or for a fleet case a 3-node cluster. The cluster env
 * lends its connection and its URL list to the env's unused it_server, so
 * the helpers that take an it_server (publishing, consumer and stream
 * reads, --nats-url) reach the cluster and fail over with it. */
/* The http case's endpoint: started before the subscribers, on a port it
 * picks and reports; stopped by the env's teardown like every process. */
static void start_endpoint(chaos_run *c)
{
    char port_file[PATH_MAX], sleep_ms[32];
    it_argv a;
    it_path(port_file, c->e, "endpoint.port");
    snprintf(sleep_ms, sizeof(sleep_ms), "%ld", c->p->sleep_ms);
    it_argv_init(&a);
    it_argv_addl(&a, "/usr/bin/env", "python3", HTTP_EFFECTS_PY, "--port-file", port_file,
                 "--effects", c->effects, "--sleep-ms", sleep_ms, "--down-flag", c->down, NULL);
    assert_true(it_spawn(&c->endpoint, c->e, "endpoint", &a));
    it_argv_free(&a);
    int64_t end = it_now_ms() + it_timeout(10000);
    char *text = NULL;
    while ((text = it_file_read(NULL, port_file)) == NULL) {
        if (it_now_ms() > end)
            fail_msg("chaos: the http endpoint did not start");
        it_sleep_ms(50);
    }
    snprintf(c->http_url, sizeof(c->http_url), "http://127.0.0.1:%ld/", strtol(text, NULL, 10));
    free(text);
}

static void *seed_setup(chaos_run *c)
{
    void *state = NULL;
    assert_int_equal(c->p->fleet ? it_cluster_setup(&state) : it_setup(&state), 0);
    c->e = state;
    c->node_down = -1;
    if (!c->p->fleet)
        return state;
    c->cluster = it_cluster_of(c->e);
    it_server *s = &c->e->server;
    s->nc = it_cluster_client(c->cluster);
    s->js = it_cluster_js(c->cluster);
    assert_true(s->nc != NULL && s->js != NULL);
    snprintf(s->url, sizeof(s->url), "%s", it_cluster_urls(c->cluster));
    return state;
}

static void seed_teardown(chaos_run *c, void **state)
{
    if (!c->p->fleet) {
        it_teardown(state);
        return;
    }
    /* Borrowed from the cluster, which closes them itself. */
    c->e->server.nc = NULL;
    c->e->server.js = NULL;
    it_cluster_teardown(state);
}

static void run_seed(chaos_result *r, const chaos_params *p, unsigned long seed)
{
    chaos_run c = {.p = p, .r = r, .rng = seed * 0x2545f4914f6cdd1dull + 1, .paused = -1};
    void *state = seed_setup(&c);
    char a_path[PATH_MAX], b_path[PATH_MAX], payload[32];
    memset(r, 0, sizeof(*r));
    r->seed = seed;
    r->bound = roll_or_crash_bound(p);
    r->pause_bound = repeat_bound_per_pause(p->concurrency, p->commit_ms, (double)p->sleep_ms);
    it_path(c.effects, c.e, "effects.log");
    it_path(c.flag, c.e, "recorder-outage.flag");
    it_path(c.db, c.e, "markers.db");
    it_path(c.down, c.e, "endpoint-down.flag");

    size_t n = (size_t)p->events;
    char **ids = calloc(n, sizeof(char *));
    assert_non_null(ids);
    for (size_t i = 0; i < n; i++) {
        ids[i] = malloc(33);
        assert_non_null(ids[i]);
        chaos_make_id(ids[i], &c.rng, i);
    }
    int64_t t0 = it_now_ms();
    if (p->roll) {
        create_consumer(&c);
        check_stream_replicas(&c);
        n = run_roll(&c, ids, n);
    } else {
        snprintf(payload, sizeof(payload), "sleep:%ld", p->sleep_ms);
        pick_crash_events(c.crash_idx, p->crash_events, n, &c.rng);
        write_backlog(c.e, ids, n, &c.rng, payload, c.crash_idx, p->crash_events, a_path, b_path);
        if (p->fleet)
            create_fleet_streams(&c);
        if (p->http)
            start_endpoint(&c);
        create_consumer(&c);
        set_pause(&c);
        publish_backlog(&c, a_path, b_path);
        t0 = it_now_ms();
        for (int i = 0; i < p->subscribers; i++)
            spawn_subscriber(&c, i);
        run_chaos(&c);
    }
    settle(&c);
    r->elapsed_ms = it_now_ms() - t0;
    count_effects(&c, ids, n);

    it_lines_free(ids, (size_t)p->events);
    it_done(c.e);
    seed_teardown(&c, &state);
}

/* ---- reporting ---------------------------------------------------------- */

static double per_kill(const chaos_result *r)
{
    return r->kills > 0 ? (double)r->repeats_kill / r->kills : (double)r->repeats_kill;
}

static double per_crash(const chaos_result *r)
{
    return r->crashes > 0 ? (double)r->repeats_crash / r->crashes : 0.0;
}

static void print_header(const chaos_params *p)
{
    if (p->roll) {
        printf("chaos %s: %d subscribers, handler %ld ms\n", p->name, p->subscribers, p->sleep_ms);
        printf("roll: 3-node cluster, recorder kv:%s (3 replicas), streams --stream-replicas 3, "
               "%ld events/s, %d steps (SIGTERM, then kill -9, of each node), down %ld-%ld ms, "
               "%ld ms between steps\nbound: 0 repeats per step (no host dies), gap <= election "
               "+ %d ms\n",
               FLEET_BUCKET, p->rate, ROLL_STEPS, p->down_min_ms, p->down_max_ms, p->steady_ms,
               ROLL_GAP_SLACK_MS);
        return;
    }
    printf("chaos %s: %d subscribers, %ld events (+%ld duplicates), handler %ld ms, %d kills, "
           "%d server restart(s), outage %ld ms\n",
           p->name, p->subscribers, p->events, p->events / 10, p->sleep_ms, p->kills, p->restarts,
           p->outage_ms);
    if (p->fleet)
        printf("fleet: 3-node cluster, recorder kv:%s (3 replicas), %d leader kill(s) of %ld ms\n",
               FLEET_BUCKET, p->leader_kills, p->leader_down_ms);
    if (p->flaps > 0)
        printf("flaps: the endpoint answers 503 %d times per seed, %ld-%ld ms each (the retry "
               "budget of --retry-delay 200ms is about 3 s); circuits at their defaults\n",
               p->flaps, p->flap_min_ms, p->flap_max_ms);
    if (p->crash_events > 0 || p->pauses > 0)
        printf("crashes: %d crashing events (at most --max-deliver %ld + 1 crashes each, "
               "dead-lettered once); pauses: %d SIGSTOP of 2.5 x AckWait%s%s\n",
               p->crash_events, p->max_deliver, p->pauses,
               p->ack_wait[0] != '\0' ? ", --ack-wait " : "", p->ack_wait);
    printf("bound: %.0f repeats per kill and per crash, %.0f per pause (C=%d, I=%.3g ms%s, "
           "t=%ld ms)\n",
           repeat_bound_per_kill(p->concurrency, p->commit_ms, (double)p->sleep_ms),
           repeat_bound_per_pause(p->concurrency, p->commit_ms, (double)p->sleep_ms),
           p->concurrency, p->commit_ms,
           p->commit_flag[0] != '\0' ? " from --commit-interval"
                                     : ": one batch of 64, no committer",
           p->sleep_ms);
}

static void print_roll_table(const chaos_params *p, const chaos_result *rs, size_t n)
{
    printf("\n%-12s | seed | kills | published | lost | dead-lettered | repeats | repeats/kill | "
           "longest gap ms | raw gap ms | election ms | gaps over | exits | seconds\n",
           "case");
    for (size_t i = 0; i < n; i++) {
        const chaos_result *r = &rs[i];
        printf("%-12s | %4lu | %5d | %9zu | %4zu | %13zu | %7zu | %12.2f | %14ld | %10ld | %11ld | "
               "%9ld | %5d | %7.1f\n",
               p->name, r->seed, r->kills, r->published, r->lost, r->dead_lettered, r->repeats,
               per_kill(r), r->longest_gap_ms, r->raw_gap_ms, r->longest_election_ms, r->gaps_over,
               r->unplanned_exits, (double)r->elapsed_ms / 1000.0);
    }
    fflush(stdout);
}

static void print_table(const chaos_params *p, const chaos_result *rs, size_t n)
{
    if (p->roll) {
        print_roll_table(p, rs, n);
        return;
    }
    printf("\n%-12s | seed | kills | in backlog | crashes | pauses | lost | dead-lettered | "
           "crashing dl | repeats | repeats/kill | repeats/crash | repeats/pause max | bound | "
           "settled | exits | seconds\n",
           "case");
    for (size_t i = 0; i < n; i++) {
        const chaos_result *r = &rs[i];
        printf("%-12s | %4lu | %5d | %10d | %7d | %6d | %4zu | %13zu | %11zu | %7zu | %12.2f | "
               "%13.2f | %17zu | %2.0f/%2.0f | %7s | %5d | %7.1f\n",
               p->name, r->seed, r->kills, r->kills_in_backlog, r->crashes, r->pauses, r->lost,
               r->dead_lettered, r->crash_dead_lettered, r->repeats, per_kill(r), per_crash(r),
               r->pause_repeats_max, r->bound, r->pause_bound, r->settled ? "yes" : "no",
               r->unplanned_exits, (double)r->elapsed_ms / 1000.0);
    }
    fflush(stdout);
}

static void report_json(const chaos_params *p, const chaos_result *r)
{
    FILE *f = chaos_report_open();
    if (f == NULL)
        return;
    fprintf(
        f,
        "{\"case\":\"%s\",\"seed\":%lu,\"events\":%ld,\"duplicates\":%ld,\"subscribers\":%d,"
        "\"handler_ms\":%ld,\"concurrency\":%d,\"commit_interval_ms\":%.3f,\"kills\":%d,"
        "\"kills_in_backlog\":%d,\"server_restarts\":%d,\"leader_kills\":%d,"
        "\"recorder\":\"%s\",\"outage_ms\":%ld,\"flaps\":%d,\"lost\":%zu,"
        "\"dead_lettered\":%zu,\"dead_lettered_never_handled\":%zu,\"repeats\":%zu,"
        "\"repeats_per_kill\":%.3f,\"bound_per_kill\":%.0f,\"unexpected\":%zu,"
        "\"settled\":%s,\"unplanned_exits\":%d,\"elapsed_ms\":%" PRId64
        ",\"published\":%zu,\"longest_gap_ms\":%ld,\"raw_gap_ms\":%ld,\"longest_election_ms\":%ld,"
        "\"gaps_over\":%ld,\"crash_events\":%d,\"crashes\":%d,\"crash_most\":%ld,"
        "\"crashing_dead_lettered\":%zu,\"pauses\":%d,\"pauses_in_backlog\":%d,\"pause_ms\":%ld,"
        "\"repeats_kill\":%zu,\"repeats_crash\":%zu,\"repeats_pause\":%zu,"
        "\"repeats_pause_max\":%zu,\"bound_per_pause\":%.0f}\n",
        p->name, r->seed, p->events, p->events / 10, p->subscribers, p->sleep_ms, p->concurrency,
        p->commit_ms, r->kills, r->kills_in_backlog, r->restarts, r->leader_kills,
        p->fleet ? "kv:" FLEET_BUCKET " r3" : "sqlite", p->outage_ms, r->flaps, r->lost,
        r->dead_lettered, r->dl_never_handled, r->repeats, per_kill(r), r->bound, r->unexpected,
        r->settled ? "true" : "false", r->unplanned_exits, r->elapsed_ms, r->published,
        r->longest_gap_ms, r->raw_gap_ms, r->longest_election_ms, r->gaps_over, p->crash_events,
        r->crashes, r->crash_most, r->crash_dead_lettered, r->pauses, r->pauses_in_backlog,
        r->pause_ms, r->repeats_kill, r->repeats_crash, r->repeats_pause, r->pause_repeats_max,
        r->pause_bound);
    fclose(f);
}

/* Why a seed broke the promise, in words; "" when it kept it. A run
 * without kills may repeat nothing at all. */
static void verdict(char *out, size_t cap, const chaos_params *p, const chaos_result *r)
{
    size_t used = 0;
    out[0] = '\0';
#define SAY(...) used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, __VA_ARGS__)
    if (r->lost > 0)
        SAY(" %zu lost;", r->lost);
    if (r->dead_lettered > 0)
        SAY(" %zu valid events dead-lettered (%zu never handled);", r->dead_lettered,
            r->dl_never_handled);
    if (r->kills == 0 && r->repeats_kill > 0)
        SAY(" %zu repeated effects without a kill, crash or pause;", r->repeats_kill);
    if (r->kills > 0 && per_kill(r) > r->bound)
        SAY(" %.2f repeats per kill > bound %.0f;", per_kill(r), r->bound);
    if (per_crash(r) > r->bound)
        SAY(" %.2f repeats per crash > bound %.0f;", per_crash(r), r->bound);
    if ((double)r->pause_repeats_max > r->pause_bound)
        SAY(" %zu repeats after one pause > bound %.0f;", r->pause_repeats_max, r->pause_bound);
    if (r->crash_not_once > 0)
        SAY(" %zu crashing events not dead-lettered exactly once (or handled ok);",
            r->crash_not_once);
    if (p->max_deliver > 0 && r->crash_most > p->max_deliver + 1)
        SAY(" a crashing event crashed %ld times > --max-deliver %ld + 1;", r->crash_most,
            p->max_deliver);
    if (r->pauses < p->pauses)
        SAY(" %d of %d pauses made;", r->pauses, p->pauses);
    if (r->unexpected > 0)
        SAY(" %zu effects of ids never published;", r->unexpected);
    if (!r->settled)
        SAY(" the consumer never became idle;");
    if (r->unplanned_exits > 0)
        SAY(" %d unplanned exits;", r->unplanned_exits);
    if (r->gaps_over > 0)
        SAY(" %ld stretches with nothing handled beyond election + %d ms (or no leader);",
            r->gaps_over, ROLL_GAP_SLACK_MS);
    if (r->uncurrent)
        SAY(" a restarted node did not catch up;");
#undef SAY
}

static void run_case(chaos_params *p)
{
    char dir[PATH_MAX];
    assert_true(it_tmpdir_create(dir, sizeof(dir)));
    params_from_env(p, dir);
    it_tmpdir_remove(dir);
    print_header(p);
    chaos_result rs[MAX_SEEDS];
    for (size_t i = 0; i < p->seed_count; i++) {
        printf("seed %lu:\n", p->seeds[i]);
        fflush(stdout);
        run_seed(&rs[i], p, p->seeds[i]);
        print_table(p, &rs[i], 1);
        report_json(p, &rs[i]);
    }
    print_table(p, rs, p->seed_count);
    int failed = 0;
    for (size_t i = 0; i < p->seed_count; i++) {
        char why[512];
        verdict(why, sizeof(why), p, &rs[i]);
        if (why[0] != '\0') {
            printf("seed %lu broke the promise:%s\n", rs[i].seed, why);
            failed++;
        }
    }
    fflush(stdout);
    if (failed > 0)
        fail_msg("chaos %s: %d of %zu seeds broke the promise (table above)", p->name, failed,
                 p->seed_count);
}

/* ---- the cases ------------------------------------------------------------ */

/* The run of scripts/test.sh: short enough for every build. Its AckWait
 * keeps each crash's redelivery and each pause short; one and a half of
 * it (a lease renewed at half its length, kept one more lease while its
 * holder lives) still outlasts the outage plus the marks' longest retry
 * back-off (2 s), so the outage alone takes no live holder's claim. */
static void short_run(void **state)
{
    (void)state;
    chaos_params p = {.name = "short_run",
                      .default_seeds = "1,2,3,4,5",
                      .events = 3000,
                      .subscribers = 3,
                      .kills = 3,
                      .restarts = 1,
                      .sleep_ms = 1,
                      .outage_ms = 3000,
                      .respawn_ms = 500,
                      .settle_ms = 180000,
                      .default_ack_wait = "4s",
                      .crash_events = 2,
                      .pauses = 1};
    run_case(&p);
}

/* The run of the issue: a backlog of 20,000 events. AckWait chosen as in
 * short_run, for a 10 s outage. */
static void long_run(void **state)
{
    (void)state;
    chaos_params p = {.name = "long_run",
                      .default_seeds = "1,2,3,4,5",
                      .events = 20000,
                      .subscribers = 3,
                      .kills = 6,
                      .restarts = 1,
                      .sleep_ms = 1,
                      .outage_ms = 10000,
                      .respawn_ms = 500,
                      .settle_ms = 600000,
                      .default_ack_wait = "10s",
                      .crash_events = 2,
                      .pauses = 2};
    run_case(&p);
}

/* A recorder outage alone: nothing may repeat, be lost or dead-lettered. */
static void outage_short(void **state)
{
    (void)state;
    chaos_params p = {.name = "outage_short",
                      .default_seeds = "1",
                      .events = 3000,
                      .subscribers = 3,
                      .kills = 0,
                      .restarts = 0,
                      .sleep_ms = 1,
                      .outage_ms = 5000,
                      .respawn_ms = 500,
                      .settle_ms = 180000};
    run_case(&p);
}

static void outage_long(void **state)
{
    (void)state;
    chaos_params p = {.name = "outage_long",
                      .default_seeds = "1",
                      .events = 20000,
                      .subscribers = 3,
                      .kills = 0,
                      .restarts = 0,
                      .sleep_ms = 1,
                      .outage_ms = 30000,
                      .respawn_ms = 500,
                      .settle_ms = 600000};
    run_case(&p);
}

/* The fleet (docs/testing.md, "Chaos test"): five hosts on one durable and a
 * 3-replica kv: bucket on a 3-node cluster; subscriber kills and a kill -9
 * of the node leading the bucket's stream. The short run is for CI. */
static void fleet_short(void **state)
{
    (void)state;
    chaos_params p = {.name = "fleet_short",
                      .default_seeds = "1",
                      .events = 1500,
                      .subscribers = 5,
                      .kills = 2,
                      .sleep_ms = 1,
                      .respawn_ms = 500,
                      .settle_ms = 120000,
                      .fleet = true,
                      .leader_kills = 1,
                      .leader_down_ms = 3000};
    run_case(&p);
}

static void fleet_long(void **state)
{
    (void)state;
    chaos_params p = {.name = "fleet_long",
                      .default_seeds = "1,2,3",
                      .events = 6000,
                      .subscribers = 5,
                      .kills = 6,
                      .sleep_ms = 1,
                      .respawn_ms = 500,
                      .settle_ms = 600000,
                      .fleet = true,
                      .leader_kills = 1,
                      .leader_down_ms = 10000};
    run_case(&p);
}

/* The rolling restart of the fleet's cluster under a steady publisher
 * (docs/testing.md, "Chaos test"), over three seeds. `events` only bounds the ids
 * the publisher may use. */
static void fleet_roll(void **state)
{
    (void)state;
    chaos_params p = {.name = "fleet_roll",
                      .default_seeds = "1,2,3",
                      .events = 200000,
                      .subscribers = 3,
                      .sleep_ms = 1,
                      .respawn_ms = 500,
                      .settle_ms = 300000,
                      .fleet = true,
                      .roll = true,
                      .rate = 200,
                      .down_min_ms = 2000,
                      .down_max_ms = 5000,
                      .steady_ms = 4000};
    run_case(&p);
}

/* The crash run once with the http plugin (docs/languages.md, "Handlers in other
 * languages"): kill -9 while requests are in flight; the keys the endpoint
 * saw twice are the repeated effects, within the same bound per kill. */
static void http(void **state)
{
    (void)state;
    chaos_params p = {.name = "http",
                      .default_seeds = "1",
                      .events = 3000,
                      .subscribers = 3,
                      .kills = 3,
                      .restarts = 0,
                      .sleep_ms = 1,
                      .outage_ms = 0,
                      .respawn_ms = 500,
                      .settle_ms = 180000,
                      .http = true};
    run_case(&p);
}

/* Issue 31: the endpoint flaps (503 for 2-6 s at a time, each longer than
 * the retry budget) between kill -9 of hosts. The short run is for CI. */
static void flap_short(void **state)
{
    (void)state;
    chaos_params p = {.name = "flap_short",
                      .default_seeds = "1",
                      .events = 1000,
                      .subscribers = 3,
                      .kills = 2,
                      .sleep_ms = 1,
                      .respawn_ms = 500,
                      .settle_ms = 180000,
                      .http = true,
                      .flaps = 2,
                      .flap_min_ms = 3000,
                      .flap_max_ms = 6000};
    run_case(&p);
}

static void flap_long(void **state)
{
    (void)state;
    chaos_params p = {.name = "flap_long",
                      .default_seeds = "1,2,3",
                      .events = 10000,
                      .subscribers = 3,
                      .kills = 6,
                      .sleep_ms = 1,
                      .respawn_ms = 500,
                      .settle_ms = 600000,
                      .http = true,
                      .flaps = 8,
                      .flap_min_ms = 2000,
                      .flap_max_ms = 15000};
    run_case(&p);
}

/* One test per line: CMake registers them by reading these lines. */
// clang-format off
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(short_run),
    cmocka_unit_test(long_run),
    cmocka_unit_test(outage_short),
    cmocka_unit_test(outage_long),
    cmocka_unit_test(fleet_short),
    cmocka_unit_test(fleet_long),
    cmocka_unit_test(fleet_roll),
    cmocka_unit_test(http),
    cmocka_unit_test(flap_short),
    cmocka_unit_test(flap_long),
};
// clang-format on

IB_TEST_MAIN(tests)
