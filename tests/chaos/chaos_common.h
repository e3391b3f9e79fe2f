/* SPDX-License-Identifier: Apache-2.0 */
/* Pieces the chaos tests share (chaos.c, chaos_ledger.c): a seeded random
 * generator, so a seed replays the same backlog and the same schedule on
 * every machine; ids that lead back to their place in the backlog; the
 * parameters every case reads from the environment; and the report file. */
#ifndef IB_CHAOS_COMMON_H
#define IB_CHAOS_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "it_support.h"

/* splitmix64: small, fast, and the same sequence on every machine. */
uint64_t chaos_rng_next(uint64_t *s);
/* Uniform in [0, 1). */
double chaos_rng_unit(uint64_t *s);
/* Uniform in [lo, hi]; lo when hi <= lo. */
long chaos_rng_range(uint64_t *s, long lo, long hi);

/* A uuid4 in 32 hex digits whose last 12 digits are `index`, so a line an
 * effect wrote leads straight back to its event. */
void chaos_make_id(char out[33], uint64_t *rng, size_t index);

/* The index an id made by chaos_make_id carries, or -1 when it is not one
 * of ids[0..n). */
long chaos_id_index(const char *id, char *const *ids, size_t n);

/* A non-negative integer from the environment, `def` when unset or empty;
 * fails the test on anything else. */
long chaos_env_long(const char *name, long def);

/* The seeds to run: IB_CHAOS_SEEDS ("1,2,3") if set, else `def`. Fails
 * the test on more than `max` seeds or none. Returns the count. */
size_t chaos_seeds(unsigned long *out, size_t max, const char *def);

/* IB_CHAOS_REPORT opened for appending one JSON line per seed; NULL when
 * unset or when it cannot be opened (said on stderr). The caller closes. */
FILE *chaos_report_open(void);

/* Prints the last line a process wrote to stderr: why it ended. */
void chaos_print_last_words(const it_proc *p);

/* Says that a subscriber ended on its own (a supervisor would restart it;
 * the caller does, and counts it as an unplanned exit), and why. */
void chaos_report_exit(const it_proc *p);

/* True once a subscriber spawned at `spawned_at` (it_now_ms) has logged
 * "running" (connected, consumer bound), or after CHAOS_STARTUP_MS. */
#define CHAOS_STARTUP_MS 10000
bool chaos_subscriber_up(const it_proc *p, int64_t spawned_at);

/* Waits up to timeout_ms for the consumer `durable` on IT_STREAM to be
 * idle; says so when it never becomes idle. */
bool chaos_wait_idle(it_server *s, const char *durable, long timeout_ms);

/* Sends SIGTERM to each of n processes, then waits for each; one that
 * does not exit 0 is reported with its last words and killed. Returns how
 * many did not exit 0. */
int chaos_stop_all(it_proc *procs, int n);

#endif
