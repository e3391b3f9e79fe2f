/* SPDX-License-Identifier: Apache-2.0 */
/* A worker of the model test (test_model.c): one process with one
 * recorder on the shared SQLite file, making the calls its parent sends
 * (model_wire.h) and answering each once it returned. It uses the
 * recorder only through its API, and SQLite only through the fault VFS,
 * installed before anything else (IB_FAULT_VFS arms faults for the first
 * call; each command may arm its own).
 *
 * usage: model_worker DB SALT
 *   commands on stdin, replies on stdout, the recorder's log on stderr. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_vfs.h"
#include "model_wire.h"
#include "owner.h"

typedef struct worker {
    const char *db;
    uint64_t salt;
    ib_recorder *r;
    char owner[IB_OWNER_MAX + 1];
    unsigned tokens; /* tokens minted, for the opaque ones */
    ib_marker_key keys[MODEL_KEYS_MAX];
    char ids[MODEL_KEYS_MAX][IB_ID_BUF_SIZE];
} worker;

/* The batch of the command's keys (borrowed from the worker's table). */
static const ib_marker_key *batch(worker *w, const model_op *op)
{
    static ib_marker_key out[MODEL_KEYS_MAX];
    for (size_t i = 0; i < op->n; i++)
        out[i] = w->keys[op->keys[i]];
    return out;
}

static ib_status do_open(worker *w, const model_op *op, ib_error *err)
{
    char uri[4200];
    ib_recorder_close(w->r);
    w->r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s?busy_timeout_ms=%" PRId64 "%s", w->db, op->arg,
             op->probe ? "&synchronous=full" : "");
    return ib_recorder_open(&w->r, uri, NULL, err);
}

static ib_status do_owner(worker *w, const model_op *op, model_reply *rep, ib_error *err)
{
    ib_status st = IB_OK;
    w->tokens++;
    if (op->arg != 0)
        snprintf(w->owner, sizeof(w->owner), "model-opaque-%d-%u", (int)getpid(), w->tokens);
    else
        st = ib_owner_make(w->owner, sizeof(w->owner), "model", err);
    snprintf(rep->text, sizeof(rep->text), "%s", w->owner);
    return st;
}

static ib_status do_acquire(worker *w, const model_op *op, model_reply *rep, ib_error *err)
{
    ib_claim_info info[MODEL_KEYS_MAX];
    ib_claim_request req = {.owner = w->owner,
                            .lease_ms = op->arg,
                            .max_attempts = op->max_attempts,
                            .probe_holders = op->probe};
    ib_status st = ib_recorder_acquire_batch(w->r, info, batch(w, op), op->n, &req, err);
    for (size_t i = 0; st == IB_OK && i < op->n; i++)
        rep->a[i] = (model_answer){(int)info[i].state, info[i].attempts, info[i].remaining_ms};
    return st;
}

/* The calls that answer one bool per key. */
static ib_status do_bools(worker *w, const model_op *op, model_reply *rep, ib_error *err)
{
    bool b[MODEL_KEYS_MAX] = {false};
    const ib_marker_key *k = batch(w, op);
    ib_status st = IB_ERR_INVALID_ARG;
    if (op->kind == OP_MARK)
        st = ib_recorder_mark_owned_batch(w->r, b, k, op->n, w->owner, err);
    else if (op->kind == OP_RENEW)
        st = ib_recorder_renew_batch(w->r, b, k, op->n, w->owner, op->arg, err);
    else if (op->kind == OP_CHECK)
        st = ib_recorder_check_batch(w->r, b, k, op->n, err);
    else if (op->kind == OP_IS_PROCESSED)
        st = ib_recorder_is_processed(w->r, &b[0], k[0].consumer, k[0].event_id, err);
    else if (op->kind == OP_LOOKUP)
        st = ib_recorder_lookup(w->r, &b[0], NULL, k[0].consumer, k[0].event_id, err);
    else if (op->kind == OP_FORGET)
        st = ib_recorder_forget(w->r, &b[0], k[0].consumer, k[0].event_id, err);
    else if (op->kind == OP_MARK_PLAIN) {
        st = ib_recorder_mark_batch(w->r, k, op->n, err);
        for (size_t i = 0; i < op->n; i++)
            b[i] = true;
    }
    for (size_t i = 0; i < op->n; i++)
        rep->a[i].state = b[i];
    return st;
}

static ib_status do_inspect(worker *w, const model_op *op, model_reply *rep, ib_error *err)
{
    ib_marker_state ms;
    const ib_marker_key *k = batch(w, op);
    ib_status st = ib_recorder_inspect(w->r, &ms, k[0].consumer, k[0].event_id, err);
    if (st == IB_OK) {
        rep->a[0].state = ms.marked;
        rep->value = ms.lease_left_ms;
        snprintf(rep->text, sizeof(rep->text), "%s", ms.owner);
    }
    return st;
}

typedef struct list_ctx {
    const worker *w;
    const model_op *op;
    model_reply *rep;
} list_ctx;

static int listed(void *vctx, const ib_marker_info *m)
{
    list_ctx *c = vctx;
    for (size_t i = 0; i < c->op->n; i++) {
        const ib_marker_key *k = &c->w->keys[c->op->keys[i]];
        if (strcmp(k->consumer, m->consumer) == 0 && strcmp(k->event_id, m->event_id) == 0)
            c->rep->a[i].state = 1;
    }
    return 0;
}

/* The calls whose answer the model does not check, only their status. */
static ib_status do_upkeep_calls(worker *w, const model_op *op, model_reply *rep, ib_error *err)
{
    uint64_t removed = 0;
    ib_recorder_stats stats;
    ib_attempt_stats astats;
    switch (op->kind) {
    case OP_PRUNE: {
        ib_status st = ib_recorder_prune(w->r, &removed, op->arg, err);
        rep->value = (int64_t)removed;
        return st;
    }
    case OP_END_ATTEMPTS:
        return ib_recorder_end_attempts(w->r, batch(w, op), op->n, err);
    case OP_RELEASE:
        return ib_recorder_release_batch(w->r, batch(w, op), op->n, w->owner, err);
    case OP_STATS:
        return ib_recorder_stats_get(w->r, &stats, err);
    case OP_ATTEMPT_STATS:
        return ib_recorder_attempt_stats(w->r, &astats, (uint32_t)op->arg, err);
    default: /* the upkeep op of schema 5: nothing to do since schema 6 */
        return IB_OK;
    }
}

static ib_status call(worker *w, const model_op *op, model_reply *rep, ib_error *err)
{
    if (op->kind == OP_OPEN)
        return do_open(w, op, err);
    if (op->kind == OP_OWNER)
        return do_owner(w, op, rep, err);
    if (op->kind == OP_EXIT)
        return IB_OK; /* main closes the recorder */
    if (w->r == NULL && op->kind != OP_CLOSE)
        return ib_error_set(err, IB_ERR_CLOSED, "model worker: no recorder open");
    if (op->kind == OP_CLOSE) {
        ib_recorder_close(w->r);
        w->r = NULL;
        return IB_OK;
    }
    if (op->kind == OP_ACQUIRE)
        return do_acquire(w, op, rep, err);
    if (op->kind == OP_INSPECT)
        return do_inspect(w, op, rep, err);
    if (op->kind == OP_LIST) {
        list_ctx c = {w, op, rep};
        rep->n = op->n;
        return ib_recorder_list(w->r, NULL, 0, listed, &c, err);
    }
    if (op->kind == OP_PRUNE || op->kind == OP_END_ATTEMPTS || op->kind == OP_RELEASE ||
        op->kind == OP_STATS || op->kind == OP_ATTEMPT_STATS || op->kind == OP_UPKEEP)
        return do_upkeep_calls(w, op, rep, err);
    return do_bools(w, op, rep, err);
}

/* Runs one command: arms its fault, calls, disarms, answers. */
static int serve(worker *w, const model_op *op)
{
    model_reply rep;
    ib_error err;
    char line[MODEL_LINE_MAX], why[256];
    memset(&rep, 0, sizeof(rep));
    ib_error_clear(&err);
    rep.seq = op->seq;
    rep.n = op->n;
    uint64_t fired = fault_vfs_fired_total();
    ib_status st;
    if (fault_vfs_arm_text(op->fault, why, sizeof(why)) != 0)
        st = ib_error_set(&err, IB_ERR_INVALID_ARG, "model worker: %s", why);
    else
        st = call(w, op, &rep, &err);
    fault_vfs_disarm();
    rep.fired = (unsigned)(fault_vfs_fired_total() - fired);
    rep.status = (int)st;
    if (st != IB_OK)
        snprintf(rep.text, sizeof(rep.text), "%s", err.msg[0] != '\0' ? err.msg : "(no message)");
    int n = model_reply_format(line, sizeof(line), op, &rep);
    if (n < 0)
        return -1;
    for (ssize_t at = 0; at < n;) {
        ssize_t k = write(STDOUT_FILENO, line + at, (size_t)(n - at));
        if (k < 0 && errno != EINTR)
            return -1;
        at += k > 0 ? k : 0;
    }
    return 0;
}

static void build_keys(worker *w)
{
    for (unsigned k = 0; k < MODEL_KEYS_MAX; k++) {
        model_key_id(w->ids[k], k, w->salt);
        w->keys[k].consumer = model_key_consumer(k);
        w->keys[k].event_id = w->ids[k];
    }
}

int main(int argc, char **argv)
{
    static worker w;
    char why[256] = "", line[MODEL_LINE_MAX];
    if (argc != 3) {
        fprintf(stderr, "usage: model_worker DB SALT\n");
        return 64;
    }
    if (fault_vfs_install(why, sizeof(why)) != 0) {
        fprintf(stderr, "model_worker: %s\n", why);
        return 2;
    }
    w.db = argv[1];
    w.salt = strtoull(argv[2], NULL, 10);
    build_keys(&w);
    snprintf(w.owner, sizeof(w.owner), "model-unset-%d", (int)getpid());
    while (fgets(line, sizeof(line), stdin) != NULL) {
        model_op op;
        line[strcspn(line, "\n")] = '\0';
        if (model_op_parse(&op, line) != 0) {
            fprintf(stderr, "model_worker: bad command: %s\n", line);
            return 2;
        }
        if (serve(&w, &op) != 0)
            return 2;
        if (op.kind == OP_EXIT)
            break;
    }
    ib_recorder_close(w.r);
    return 0;
}
