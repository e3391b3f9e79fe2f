/* SPDX-License-Identifier: Apache-2.0 */
/* Shared fixture of the dispatch tests: a recorder of a given kind opened
 * through ib_recorder_open() and wrapped in a "counting" kind that counts the
 * batch calls and fails them on demand, a settable clock, test events and a
 * scriptable handler. */
#ifndef IB_DISPATCH_FIXTURE_H
#define IB_DISPATCH_FIXTURE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"

/* Calls seen by the counting recorder, and failures it injects. */
typedef struct fx_calls {
    atomic_int check_batch;
    atomic_int claim_batch;
    atomic_int mark_batch;
    atomic_int release_batch;
    atomic_bool fail_check;
    atomic_bool fail_claim;
    atomic_bool fail_mark;
    atomic_int transact;
    atomic_bool fail_transact;      /* the transaction fails before any work runs */
    atomic_bool block_renew;        /* a renewal waits until this is cleared */
    atomic_bool renew_blocked;      /* a renewal is waiting so */
    atomic_int claim_delay_ms;      /* a claim (acquire) first waits this long */
    atomic_int renew_batch;         /* lease renewals (renew_batch calls) */
    _Atomic pthread_t renew_thread; /* the thread of the last one (stored before renew_batch) */
} fx_calls;

typedef struct fx {
    const char *kind;   /* "memory" or "sqlite" */
    char dir[PATH_MAX]; /* temporary directory of the sqlite file */
    ib_recorder *inner; /* the real recorder; owned by `rec` */
    ib_recorder *rec;   /* the counting wrapper the dispatch table uses */
    fx_calls *calls;    /* inside `rec` */
    ib_dispatch *d;     /* NULL until fx_dispatch() */
} fx;

/* Opens a recorder of `kind` ("memory" or "sqlite": a file in a fresh
 * directory) with the fixture's clock, wrapped in the counting kind. */
void fx_open(fx *f, const char *kind);
/* Creates f->d over the wrapper; `o` NULL = fx_default_options(). */
void fx_dispatch(fx *f, const ib_dispatch_options *o);
/* Frees the table, closes the recorders and removes the directory. */
void fx_close(fx *f);
/* Options of the tests: owner "test-owner", a 30 s lease, and a commit
 * window longer than any batch (one mark call per run). */
ib_dispatch_options fx_default_options(void);

/* The clock every recorder of the fixture reads (unix ms). */
void fx_clock_set(int64_t now_ms);
int64_t fx_clock_now(void);

/* True if (consumer, id) is marked in the real recorder. */
bool fx_marked(fx *f, const char *consumer, const char *id);

/* Fills `ev` with a valid event: id derived from `n` (distinct n, distinct
 * ids), the given type (BORROWED), a small payload and one header. */
void fx_event(ib_event *ev, unsigned n, const char *type);
/* Runs `n` deliveries through f->d; asserts the call succeeded. */
void fx_run_ok(fx *f, ib_delivery *dl, size_t n);
/* Runs one fresh delivery of `ev` and returns it. */
ib_delivery fx_run_one(fx *f, const ib_event *ev, uint64_t delivery_count);
/* Fills `dl` as a fresh delivery of `ev`. */
void fx_delivery(ib_delivery *dl, const ib_event *ev, uint64_t delivery_count);

/* A handler whose verdict is set by the test; it counts its calls and keeps
 * what it saw last. Thread-safe. */
typedef struct fx_handler {
    atomic_int calls;
    atomic_int verdict; /* ib_verdict to return */
    pthread_mutex_t mu;
    char consumer[IB_CONSUMER_MAX + 1]; /* last raw event seen (under mu) */
    char id[IB_ID_BUF_SIZE];
    char subject[64];
    uint64_t delivery_count;
    uint64_t stream_seq;
    uint32_t raw_size;
    size_t payload_len;
    bool payload_matches; /* handle()'s payload is the raw event's */
    char header_value[64];
    char traceparent[64];     /* ib_raw_event_traceparent, "" for NULL */
    char tracestate[64];      /* ib_raw_event_tracestate, "" for NULL */
    bool current_is_event;    /* ib_trace_current() named the same span as the raw event */
    pthread_t thread;         /* thread of the last call */
    atomic_bool other_thread; /* some call ran on another thread than `thread` before it */
    bool seen_thread;
} fx_handler;

void fx_handler_init(fx_handler *h, ib_verdict verdict);
void fx_handler_destroy(fx_handler *h);
ib_verdict fx_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                     const ib_raw_event *ev);

/* Registers `h` for one type under `consumer`; asserts success. */
void fx_add(fx *f, const char *consumer, const char *type, fx_handler *h);

/* Iteration count scaled down under valgrind. */
size_t fx_scale(size_t normal, size_t under_valgrind);

/* A test body run once per recorder kind: BOTH_KINDS(name) defines the
 * cmocka tests name_memory and name_sqlite, each with a fresh fixture. */
typedef void (*fx_case)(fx *f);
void fx_run_case(const char *kind, fx_case fn);

#define BOTH_KINDS(name)                                                                           \
    static void name##_memory(void **state)                                                        \
    {                                                                                              \
        (void)state;                                                                               \
        fx_run_case("memory", name);                                                               \
    }                                                                                              \
    static void name##_sqlite(void **state)                                                        \
    {                                                                                              \
        (void)state;                                                                               \
        fx_run_case("sqlite", name);                                                               \
    }

#endif
