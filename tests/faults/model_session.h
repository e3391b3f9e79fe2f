/* SPDX-License-Identifier: Apache-2.0 */
/* A model test session: the marker file, the workers sharing it, the
 * parent's seed SQL beside them, and the model every answer is checked
 * against (model_check.h). The random run (model_random.c) and the
 * scripted cases of test_model.c both drive one.
 *
 * Calls are asynchronous: session_send starts one on an idle worker,
 * session_poll collects answers as they come and checks each at once;
 * session_call does both for one call. The parent's own actions (kill -9,
 * SIGSTOP and SIGCONT, the seed's statements) happen between them. */
#ifndef IB_MODEL_SESSION_H
#define IB_MODEL_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fault_vfs.h"
#include "model_check.h"
#include "model_fleet.h"
#include "model_seed.h"
#include "model_wire.h"

#define MODEL_WORKERS_MAX 8
#define MODEL_MINE_MAX 32

typedef struct model_config {
    uint64_t seed;
    unsigned workers;    /* 1..MODEL_WORKERS_MAX */
    unsigned steps;      /* answers and parent actions before the run ends */
    unsigned keys;       /* keys in play, 2..MODEL_KEYS_MAX */
    bool hostile_rows;   /* the seed SQL sometimes inserts an id with a NUL byte */
    int busy_timeout_ms; /* the workers' recorders and the seed connection */
    const char *worker_exe;
    const char *dir; /* scratch: the file, the workers' logs */
    FILE *log;       /* violations, as found */
    FILE *trace;     /* every command, answer and parent move; NULL: none */
} model_config;

typedef struct model_figures {
    uint64_t seeds, steps, calls, calls_failed, kills, stops, crashes, exits;
    uint64_t seed_inserts, seed_selects, seed_failed, hostile_rows, hostile_committed;
    uint64_t calls_by_op[OP_KINDS];
    uint64_t faults_armed[FAULT_KINDS], faults_fired[FAULT_KINDS];
    uint64_t violations[V_KINDS];
    int64_t longest_call_ms;
    double seconds;
} model_figures;

typedef struct model_slot {
    model_proc p;
    bool live;    /* a worker process runs in this slot */
    unsigned gen; /* workers started in this slot */
    bool busy;    /* a call is in flight */
    model_op op;
    int64_t t0, real0_ms;
    int fault_kind; /* of the call in flight; -1: none */
    bool open;      /* its recorder is open */
    int owner;      /* model owner number; -1: none yet */
    bool stopped;
    int64_t cont_at;
    uint16_t mine[MODEL_MINE_MAX]; /* keys it acquired and has not marked or released */
    unsigned nmine;
    unsigned since_open;           /* calls since its last open */
    unsigned writes_since_open;    /* of them, calls that write */
    unsigned since_fault;          /* calls since one of its calls had a fault injected */
    unsigned sweeps_due;           /* full checks of every key to make next */
    char episode[MODEL_FAULT_MAX]; /* a fault armed for each of its next calls */
    unsigned episode_left;         /* (a disk full for a while) */
    int64_t last_reply;
    model_reply last; /* the last answer */
} model_slot;

typedef struct model_session {
    model_config cfg;
    char db[4096];
    model *m;
    seed_db *seed;
    model_slot slots[MODEL_WORKERS_MAX];
    unsigned seq;
    int64_t t_start, wall_start_ms;
    unsigned stopped;  /* workers stopped now */
    int64_t last_cont; /* when the last stopped worker went on */
    uint64_t rng;
    model_figures fig;
} model_session;

/* A session on a new file <dir>/markers.db. Returns NULL with `why`. */
model_session *session_new(const model_config *cfg, char *why, size_t why_len);

/* Kills every worker still running and frees the session; NULL is a
 * no-op. The directory is the caller's. */
void session_free(model_session *s);

/* Opens the parent's seed connection (creating the file when it is the
 * first) and runs the seed's CREATE. */
int session_seed_open(model_session *s, char *why, size_t why_len);

/* Starts a worker in `slot` (no recorder open yet) with IB_FAULT_VFS =
 * `faults` (NULL: none). */
int session_spawn(model_session *s, unsigned slot, const char *faults);

/* Starts `op` on the idle worker in `slot` (op->seq is set). */
int session_send(model_session *s, unsigned slot, model_op *op);

/* Waits up to `timeout_ms` for answers and checks each; a worker that
 * died unasked is counted, reported and left dead (live false). Returns
 * the number of answers taken. */
int session_poll(model_session *s, int timeout_ms);

/* session_send, then waits (up to two minutes) for its answer, copied to
 * `out` (may be NULL). Returns 0, or -1 when no answer came. */
int session_call(model_session *s, unsigned slot, model_op *op, model_reply *out);

/* kill -9 of the worker in `slot`, under load or not; its call in flight
 * ends without an answer. */
void session_kill(model_session *s, unsigned slot);

/* SIGSTOP / SIGCONT. */
void session_stop(model_session *s, unsigned slot, int64_t for_ms);
void session_cont(model_session *s, unsigned slot);

/* The seed's INSERT of `key` (with `faults` armed in this process around
 * it, "" none) and its SELECT, checked like any call. An INSERT of a
 * hostile row (the key's id, a NUL byte, "junk") marks nothing the model
 * knows. Return SQLite's code. */
int session_seed_insert(model_session *s, unsigned key, const char *faults, bool hostile);
int session_seed_select(model_session *s, unsigned key);

/* The end of a run: every stopped worker goes on, every call in flight is
 * answered, every worker checks every key, exits (and must exit 0), a new
 * worker checks every key, and the file must pass integrity_check. */
void session_finish(model_session *s);

/* The figures so far, violations included. */
void session_figures(const model_session *s, model_figures *out);

/* A full check of every key in play, as an op. */
void session_sweep_op(const model_session *s, model_op *op);

#endif
