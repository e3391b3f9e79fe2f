/* SPDX-License-Identifier: Apache-2.0 */
/* ibus dlq replay and purge (dlq.h).
 *
 * A replay republishes a dead letter's original bytes, with the original's
 * own headers (every Ibus-* header and the dead letter's Nats-Msg-Id
 * dropped), to the original subject (Ibus-Subject), and waits for
 * JetStream's ack. It carries Nats-Msg-Id "ibus-replay:<dlq stream>:<seq>":
 * never the original's id, which the events stream may still hold in its
 * duplicate window and would swallow the replay with; and the same for
 * every replay of one dead letter, so a replay repeated within the window
 * (after a kill between the publish and the delete of --purge) is dropped
 * by JetStream. Past the window a repeat is delivered, and the markers
 * make it a duplicate: the event id is the same, so handlers that marked
 * it do not run again. A dead letter is deleted (--purge) only after its
 * replay is acked. A dead letter is replayed only where it belongs
 * (dlq_target.c): its headers are input, and a forged one must not steer
 * the operator's credentials anywhere else. */
#include "dlq.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"

typedef struct replay_run {
    const ib_dlq_replay_opts *o;
    jsCtx *js;
    ib_dlq_targets *targets;
    uint64_t replayed, duplicates, skipped, failed, purged;
    int64_t started_ms;
    bool progress; /* stderr is a terminal */
} replay_run;

/* Headers of the dead letter that the replay does not carry: ours, and
 * those JetStream acts on (the dead letter's own Nats-Msg-Id among them). */
static bool header_dropped(const char *key)
{
    return strncasecmp(key, "Ibus-", 5) == 0 || strncasecmp(key, "Nats-", 5) == 0;
}

/* Sleeps until the next replay may start under --rate. */
static void pace(const replay_run *r)
{
    if (r->o->rate <= 0)
        return;
    int64_t due =
        r->started_ms + (int64_t)((double)(r->replayed + r->failed) * 1000.0 / r->o->rate);
    int64_t wait = due - ib_clock_monotonic_ms();
    if (wait > 0) {
        struct timespec ts = {.tv_sec = wait / 1000, .tv_nsec = (wait % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

static void show_progress(const replay_run *r, bool final)
{
    if (!r->progress)
        return;
    fprintf(stderr, "\rreplay: %" PRIu64 " replayed, %" PRIu64 " skipped, %" PRIu64 " failed%s",
            r->replayed, r->skipped, r->failed, final ? "\n" : "");
    fflush(stderr);
}

/* Publishes one replay and waits for its ack. 0, or -1 after saying why. */
static int publish_one(replay_run *r, const ib_dlq_entry *e, bool *duplicate)
{
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    char msg_id[IB_DLQ_STREAM_MAX + 48], why[200];
    natsStatus s = natsMsg_Create(&m, e->subject, NULL, natsMsg_GetData(e->msg),
                                  natsMsg_GetDataLength(e->msg));
    if (s == NATS_OK)
        s = ib_msg_copy_headers(m, e->msg, header_dropped);
    if (s == NATS_OK) {
        jsPubOptions_Init(&po);
        po.MsgId = ib_dlq_replay_msg_id(msg_id, sizeof(msg_id), r->o->stream, e->seq);
        po.MaxWait = r->o->timeout_ms;
        s = js_PublishMsg(&pa, r->js, m, &po, &jerr);
    }
    *duplicate = s == NATS_OK && pa != NULL && pa->Duplicate;
    if (s != NATS_OK)
        fprintf(stderr,
                "ibus dlq replay: dead letter %" PRIu64 " to %s: %s (jetstream error %d)%s\n",
                e->seq, e->subject, ib_nats_strerror(why, sizeof(why), s), (int)jerr,
                r->o->purge ? "; it stays in the dead-letter stream" : "");
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
    return s == NATS_OK ? 0 : -1;
}

static int delete_one(jsCtx *js, const char *stream, uint64_t seq)
{
    jsErrCode jerr = 0;
    char why[200];
    natsStatus s = js_DeleteMsg(js, stream, seq, NULL, &jerr);
    if (s == NATS_OK || s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
        return 0;
    fprintf(stderr,
            "ibus dlq: cannot delete dead letter %" PRIu64 " of %s: %s (jetstream error %d)\n", seq,
            stream, ib_nats_strerror(why, sizeof(why), s), (int)jerr);
    return -1;
}

/* Tests kill the replay here, between an acked publish and its delete. */
static void test_pause_before_delete(void)
{
    const char *v = getenv("IB_TEST_DLQ_KILL_BEFORE_DELETE");
    if (v != NULL && v[0] != '\0') {
        fflush(stdout);
        raise(SIGKILL);
    }
}

/* One line per dead letter: what was done and the target subject, with
 * the reason when it was skipped (`why`, may be NULL). JSON through
 * jansson: header values are input and may hold quotes. */
static void say(const replay_run *r, const ib_dlq_entry *e, const char *what, const char *why)
{
    if (r->o->json) {
        json_t *o = json_pack("{s:I,s:s?,s:s,s:s?,s:s?}", "seq", (json_int_t)e->seq, "id",
                              e->event_id, "result", what, "subject", e->subject, "why", why);
        /* a header that is not UTF-8 cannot be a JSON string: the line
         * still says what happened to which dead letter */
        if (o == NULL)
            o = json_pack("{s:I,s:s}", "seq", (json_int_t)e->seq, "result", what);
        char *text = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (text != NULL)
            printf("%s\n", text);
        free(text);
        json_decref(o);
        return;
    }
    printf("%s dead letter %" PRIu64 " (%s, id %s) to %s%s%s\n", what, e->seq,
           e->reason != NULL ? e->reason : "-", e->event_id != NULL ? e->event_id : "-",
           e->subject != NULL ? e->subject : "-", why != NULL ? ": " : "", why != NULL ? why : "");
}

/* Whether `e` may be replayed: not a conflict (unless --force), and a
 * target where it belongs (dlq_target.c; --force changes nothing there).
 * False after saying why, counted as skipped or failed. */
static bool replayable(replay_run *r, const ib_dlq_entry *e)
{
    char why[1024];
    bool conflict = e->reason != NULL && strcmp(e->reason, "conflict") == 0;
    if (conflict && !r->o->force) {
        r->skipped++;
        say(r, e,
            "skipped (conflict: the id is marked with other content, so a replay would "
            "conflict again; forget the id's markers and pass --force to run it)",
            NULL);
        return false;
    }
    switch (ib_dlq_target_check(r->targets, e, why, sizeof(why))) {
    case IB_DLQ_TARGET_OK:
        return true;
    case IB_DLQ_TARGET_SKIP:
        r->skipped++;
        say(r, e, "skipped", why);
        return false;
    default:
        r->failed++;
        fprintf(stderr, "ibus dlq replay: dead letter %" PRIu64 ": %s\n", e->seq, why);
        return false;
    }
}

static int replay_visit(void *ctx, ib_dlq_entry *e)
{
    replay_run *r = ctx;
    if (!replayable(r, e)) {
        /* said why */
    } else if (r->o->dry_run) {
        r->replayed++;
        say(r, e, "would replay", NULL);
    } else {
        bool duplicate = false;
        pace(r);
        if (publish_one(r, e, &duplicate) != 0) {
            r->failed++;
        } else {
            r->replayed++;
            r->duplicates += duplicate;
            say(r, e,
                duplicate ? "replayed (a duplicate JetStream dropped: replayed before)"
                          : "replayed",
                NULL);
            if (r->o->purge) {
                test_pause_before_delete();
                if (delete_one(r->js, r->o->stream, e->seq) == 0)
                    r->purged++;
                else
                    r->failed++;
            }
        }
    }
    show_progress(r, false);
    return 0;
}

int ib_dlq_replay(jsCtx *js, const ib_dlq_filter *f, const ib_dlq_replay_opts *o)
{
    replay_run r = {.o = o, .js = js, .started_ms = ib_clock_monotonic_ms()};
    uint64_t visited = 0;
    r.progress = isatty(STDERR_FILENO) == 1;
    r.targets = ib_dlq_targets_create(o->nc, o->api_prefix, o->timeout_ms);
    if (r.targets == NULL) {
        fprintf(stderr, "ibus dlq replay: out of memory\n");
        return 1;
    }
    int code = ib_dlq_walk(js, o->stream, f, replay_visit, &r, &visited);
    ib_dlq_targets_free(r.targets);
    show_progress(&r, true);
    if (code != 0)
        return code;
    if (!o->json)
        printf("%s=%" PRIu64 " duplicates=%" PRIu64 " skipped=%" PRIu64 " failed=%" PRIu64
               " purged=%" PRIu64 "\n",
               o->dry_run ? "would_replay" : "replayed", r.replayed, r.duplicates, r.skipped,
               r.failed, r.purged);
    return r.failed > 0 ? 1 : 0;
}

typedef struct purge_run {
    jsCtx *js;
    const char *stream;
    uint64_t purged, failed;
} purge_run;

static int purge_visit(void *ctx, ib_dlq_entry *e)
{
    purge_run *p = ctx;
    if (delete_one(p->js, p->stream, e->seq) == 0)
        p->purged++;
    else
        p->failed++;
    return 0;
}

int ib_dlq_purge(jsCtx *js, const char *stream, const ib_dlq_filter *f)
{
    purge_run p = {.js = js, .stream = stream};
    uint64_t visited = 0;
    int code = ib_dlq_walk(js, stream, f, purge_visit, &p, &visited);
    if (code != 0)
        return code;
    printf("purged=%" PRIu64 " failed=%" PRIu64 "\n", p.purged, p.failed);
    return p.failed > 0 ? 1 : 0;
}
