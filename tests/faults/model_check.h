/* SPDX-License-Identifier: Apache-2.0 */
/* The model the model test checks every answer against: what must hold
 * of a marker file, whatever the processes around it do, fail or suffer.
 *
 * The model sees each call twice: when it is sent (model_begin: the
 * earliest its effect can happen) and when its answer arrives
 * (model_end: the latest), or learns that it never will (the worker was
 * killed, or the call failed: its effect is unknown). Times are
 * CLOCK_BOOTTIME in ns, the clock the recorder's leases run on, read by
 * the parent: a call ran somewhere inside [t0, t1]. From these windows it
 * knows, per key, what is certain, and flags only answers that contradict
 * a certainty:
 *
 *  1. A key is certainly marked at t when a mark was acknowledged before
 *     t (mark_owned said marked, mark_batch returned OK, a seed INSERT
 *     committed) and nothing that might unmark it (forget, a prune whose
 *     cutoff is past the mark's time) started after the mark did. Such a
 *     key must never be reported unprocessed by anyone, nor ACQUIRED, nor
 *     refused to a mark, nor have a lease renewed.
 *  2. A key is possibly marked when some mark of it was tried (with any
 *     outcome) and no forget that returned OK came entirely after all of
 *     them. A key not possibly marked must never be reported processed.
 *  3. An owner certainly holds a key from the answer of its ACQUIRED (or
 *     held renewal) sent at a0 until a0 + lease, unless it released or
 *     marked the key, someone marked it without a fence (mark_batch, the
 *     seed's INSERT), or its process died. While it does, no other owner
 *     may be answered ACQUIRED, held or marked for the key; with
 *     probe_holders, a holder whose token the probe can read keeps it for
 *     one more lease of the asker's (recorder.h). The holder itself must
 *     not be refused its own lease, and inspect must name it.
 *
 * A failed call proves nothing either way (a failed commit may still be
 * found in the WAL later), so it only widens what is possible. */
#ifndef IB_MODEL_CHECK_H
#define IB_MODEL_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model_wire.h"

typedef enum violation_kind {
    V_MARKED_ACQUIRED = 0, /* a marked id answered ACQUIRED */
    V_MARKED_UNPROCESSED,  /* a marked id reported unprocessed (or BUSY, refused a mark,
                              renewed, or not found by forget) */
    V_PHANTOM,             /* an id never marked reported processed */
    V_DOUBLE_HOLD,         /* ACQUIRED, renewed or marked over another live owner's lease */
    V_LOST_OWN_LEASE,      /* a holder refused its own unexpired lease */
    V_INSPECT_HOLDER,      /* inspect did not name a live holder */
    V_ERROR_NO_CAUSE,      /* a call failed with no fault injected and no neighbour stopped */
    V_CRASH,               /* a worker died unasked or exited non-zero */
    V_HANG,                /* a call did not return within the bound */
    V_INTEGRITY,           /* the file failed PRAGMA integrity_check */
    V_KINDS
} violation_kind;

/* The seed's own statements, as calls of the model. */
#define MODEL_SEED_INSERT OP_KINDS
#define MODEL_SEED_SELECT (OP_KINDS + 1)

typedef struct model model;

/* One call, as model_begin and model_end see it. `keys` is BORROWED for
 * the duration of each call. */
typedef struct model_call {
    int kind;          /* model_op_kind, or MODEL_SEED_* */
    int proc;          /* the worker's slot; -1 for the parent's seed SQL */
    int owner;         /* model_owner_add's number; -1 when none */
    int64_t t0, t1;    /* sent / answered (t1 unused by model_begin) */
    int64_t real0_ms;  /* the wall clock when sent (unix ms), for prune */
    int64_t lease_ms;  /* acquire, renew */
    bool probe;        /* acquire */
    int64_t cutoff_ms; /* prune */
    size_t n;
    const uint16_t *keys;
} model_call;

model *model_new(unsigned nkeys, int64_t t_start);
void model_free(model *m);

/* A new owner token of the worker in slot `proc`; `visible`: the probe
 * can tell whether its process runs (an ib_owner_make token). Returns
 * its number, or -1 when out of memory. */
int model_owner_add(model *m, int proc, const char *token, bool visible);

/* The process in slot `proc` is gone (killed, or exited) from t on: its
 * owners hold nothing from then. */
void model_proc_gone(model *m, int proc, int64_t t);

void model_begin(model *m, const model_call *c);

/* The answer `r`, or NULL when the call's outcome is unknown (its worker
 * was killed). A reply with an error status is an unknown outcome too.
 * Checks the answer; every violation is counted and, while there is room,
 * written to `log` with `who` and the key's recent history. */
void model_end(model *m, const model_call *c, const model_reply *r, const char *who, FILE *log);

/* Counts a violation the driver found (crash, hang, ...) and logs `what`. */
void model_flag(model *m, violation_kind kind, const char *what, FILE *log);

uint64_t model_violations(const model *m, violation_kind kind);
uint64_t model_violations_total(const model *m);

/* Keys certainly marked now (for a final sweep). */
unsigned model_certainly_marked(const model *m, uint16_t *keys, unsigned cap, int64_t now);

const char *violation_name(violation_kind kind);

#endif
