/* SPDX-License-Identifier: Apache-2.0 */
/* The model test's wire: what the parent (test_model.c) asks a worker
 * (model_worker.c) to do, and what the worker answers, one text line each
 * way per recorder call, over the worker's stdin and stdout.
 *
 *   command: SEQ FAULT OP [ARGS...]
 *   reply:   SEQ STATUS FIRED [PAYLOAD...]      or   SEQ STATUS FIRED ! MESSAGE
 *
 * FAULT is a fault spec (fault_vfs.h) armed just before the call and
 * disarmed just after it, or "-". STATUS is the call's ib_status, FIRED the
 * faults injected during it. The worker writes a reply only after the call
 * returned, so a reply is proof of the call's outcome and a missing one
 * (the worker was killed) proves nothing.
 *
 * Keys are small numbers: key k is consumer MODEL_CONSUMER(k) and the id
 * rt_id(salt * MODEL_KEYS_MAX + k / 2), salt being the run's seed, so that
 * both sides name the same keys without sending ids. */
#ifndef IB_MODEL_WIRE_H
#define IB_MODEL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder.h"
#include "uuid.h"

#define MODEL_KEYS_MAX 256
#define MODEL_LINE_MAX 8192
#define MODEL_FAULT_MAX 96
#define MODEL_TEXT_MAX 256

/* The calls a worker makes; each is one recorder call (or two: OPEN
 * closes a recorder still open first). */
typedef enum model_op_kind {
    OP_OPEN = 0,      /* ib_recorder_open: ARGS busy_timeout_ms full_sync (0 or 1) */
    OP_CLOSE,         /* ib_recorder_close */
    OP_OWNER,         /* a new owner token: ARGS foreign (0: ib_owner_make; 1: opaque) */
    OP_ACQUIRE,       /* acquire_batch: ARGS lease_ms probe max_attempts KEYS */
    OP_MARK,          /* mark_owned_batch: KEYS */
    OP_MARK_PLAIN,    /* mark_batch (the seed protocol's mark, no fence): KEYS */
    OP_RELEASE,       /* release_batch: KEYS */
    OP_RENEW,         /* renew_batch: ARGS lease_ms KEYS */
    OP_CHECK,         /* check_batch: KEYS */
    OP_IS_PROCESSED,  /* is_processed: KEY */
    OP_LOOKUP,        /* lookup: KEY */
    OP_INSPECT,       /* inspect: KEY */
    OP_FORGET,        /* forget: KEY */
    OP_PRUNE,         /* prune: ARGS older_than_ms (unix ms) */
    OP_END_ATTEMPTS,  /* end_attempts: KEYS */
    OP_LIST,          /* list of every consumer: KEYS (the keys to report on) */
    OP_STATS,         /* stats_get */
    OP_ATTEMPT_STATS, /* attempt_stats: ARGS max_attempts */
    OP_UPKEEP,        /* ib__recorder_upkeep until it has nothing to do (at most 64) */
    OP_EXIT,          /* close and exit 0 */
    OP_KINDS
} model_op_kind;

typedef struct model_op {
    model_op_kind kind;
    unsigned seq;
    char fault[MODEL_FAULT_MAX]; /* "" = none */
    int64_t arg;                 /* busy_timeout_ms, lease_ms, older_than_ms, foreign,
                                    max_attempts (attempt stats) */
    bool probe;                  /* acquire; open: synchronous=full */
    uint32_t max_attempts;       /* acquire */
    size_t n;
    uint16_t keys[MODEL_KEYS_MAX];
} model_op;

/* One key's answer: acquire's ib_claim_state, attempts and remaining_ms;
 * for the others `state` is the bool (marked, held, processed, found,
 * existed, listed). */
typedef struct model_answer {
    int state;
    uint32_t attempts;
    int64_t remaining_ms;
} model_answer;

typedef struct model_reply {
    unsigned seq;
    int status;
    unsigned fired;
    size_t n;
    model_answer a[MODEL_KEYS_MAX];
    int64_t value;             /* prune: removed; inspect: lease_left_ms */
    char text[MODEL_TEXT_MAX]; /* owner: the token; inspect: the owner ("" none);
                                  an error: its message */
} model_reply;

/* True for the calls that write the file (when they have anything to
 * write). */
bool model_op_writes(model_op_kind kind);

/* "acquire", ...; "?" when out of range. */
const char *model_op_name(model_op_kind kind);

/* The key's consumer and id (out: IB_ID_BUF_SIZE bytes). */
const char *model_key_consumer(unsigned key);
void model_key_id(char *out, unsigned key, uint64_t salt);

/* Writes op as one command line with its '\n'. Returns the length, or -1
 * when it does not fit `len`. */
int model_op_format(char *buf, size_t len, const model_op *op);

/* Parses one command line (no '\n'). Returns 0, or -1 for a line the
 * wire does not allow. */
int model_op_parse(model_op *op, const char *line);

/* Writes a reply to `op` as one line with its '\n'; -1 when it does not
 * fit. Error messages lose their line breaks. */
int model_reply_format(char *buf, size_t len, const model_op *op, const model_reply *r);

/* Parses the reply line (no '\n') to `op`. Returns 0, or -1 for a line
 * that is no reply to it (another seq, the wrong number of answers). */
int model_reply_parse(model_reply *r, const model_op *op, const char *line);

#endif
