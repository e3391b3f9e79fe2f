/* SPDX-License-Identifier: Apache-2.0 */
/* Support library of the integration tests: a real nats-server and real
 * ibus processes per test, cleaned up by PID even when an assertion fails.
 *
 * A test uses the cmocka fixtures it_setup/it_teardown (or
 * it_setup_no_server when it starts its own server with credentials):
 *
 *   static void happy(void **state)
 *   {
 *       it_env *e = *state;
 *       it_argv a;
 *       it_argv_run(&a, e, "orders");
 *       it_argv_plugin(&a, "audit", "file=...");
 *       ...
 *       it_done(e);
 *   }
 *   cmocka_unit_test_setup_teardown(happy, it_setup, it_teardown)
 *
 * The teardown kills every process still running, prints the tail of every
 * process log when the test did not reach it_done() (that is, failed), and
 * removes the temporary directory (kept when IB_IT_KEEP=1).
 *
 * Paths of the ibus binary and the plugins come from the build (compile
 * definitions IT_IBUS and IT_PLUGIN_<NAME>), so a test runs the binaries of
 * its own build directory. Every address is 127.0.0.1. */
#ifndef IB_IT_SUPPORT_H
#define IB_IT_SUPPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "it_db.h"
#include "it_files.h"
#include "it_js.h"
#include "it_posted.h"
#include "it_proc.h"
#include "it_server.h"

/* The stream and subjects the tests use; --create makes them. */
#define IT_STREAM "EVENTS"
#define IT_SUBJECTS "events.>"

typedef struct it_env {
    char dir[PATH_MAX];
    it_server server;
    bool finished;
} it_env;

/* cmocka fixtures: a temporary directory and a nats-server without
 * credentials; or only the directory. */
int it_setup(void **state);
int it_setup_no_server(void **state);
int it_teardown(void **state);

/* Marks the test as passed, so the teardown prints no logs. */
void it_done(it_env *e);

/* "<env dir>/<name>" into out (PATH_MAX bytes); returns out. */
char *it_path(char *out, const it_env *e, const char *name);

/* The ibus binary and a plugin ("scripted", "audit", "flaky", "ledger", "http")
 * of this build. */
const char *it_ibus(void);
const char *it_plugin(const char *name);

/* True in a sanitizer build (the test is built with the same flags as
 * ibus). it_scaled() divides a count by the environment's IB_IT_SCALE_DIV
 * (default 1: full counts in every build), never below `min`, for slow
 * machines; it_timeout() triples a deadline under a sanitizer. */
bool it_sanitized(void);
long it_scaled(long n, long min);
int64_t it_timeout(int64_t ms);

/* A growable argv for fork/exec; strings are copied. */
#define IT_ARGV_MAX 96
typedef struct it_argv {
    char *v[IT_ARGV_MAX + 1];
    size_t n;
} it_argv;

void it_argv_init(it_argv *a);
void it_argv_add(it_argv *a, const char *arg);
void it_argv_addf(it_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds several arguments; the list ends with NULL. */
void it_argv_addl(it_argv *a, ...) __attribute__((sentinel));
void it_argv_free(it_argv *a);

/* Adds --nats-url and the server's credentials (token, user/password, TLS
 * CA and client certificate). */
void it_argv_connect(it_argv *a, const it_server *s);

/* Starts an `ibus run` command line for durable `durable`: --create on
 * IT_STREAM/IT_SUBJECTS, recorder sqlite:<dir>/markers.db, JSON logs,
 * --summary-file <dir>/summary.jsonl, and the connection flags. The test
 * adds plugins and its own flags. */
void it_argv_run(it_argv *a, it_env *e, const char *durable);

/* Adds --plugin PATH (and --allow-insecure-plugins when the build tree is
 * writable by others) and, if `config` is non-NULL, --plugin-config
 * NAME=CONFIG. */
void it_argv_plugin(it_argv *a, const char *name, const char *config);

/* Spawns an argv built above (which stays owned by the caller). */
bool it_spawn(it_proc *p, it_env *e, const char *name, it_argv *a);

/* Totals printed by `ibus publish`. */
typedef struct it_published {
    long published, unique, duplicates, failed;
} it_published;

/* Runs `ibus publish` with the connection flags, then the arguments given
 * (NULL-terminated), stdin from `stdin_path` (may be NULL). Returns its
 * exit status; `out` (may be NULL) gets its totals line. */
int it_publish(it_published *out, it_env *e, const char *stdin_path, ...) __attribute__((sentinel));

/* Like it_publish, but only starts the process (for concurrent
 * publishers); read its totals after it_proc_wait with it_published_read. */
bool it_publish_start(it_proc *p, it_env *e, const char *name, const char *stdin_path, ...)
    __attribute__((sentinel));
bool it_published_read(it_published *out, const it_proc *p);

/* Like it_publish, and also returns its stderr as malloc'd text in *err
 * ("" when empty). When `out` is non-NULL the run must have printed its
 * totals line (the test fails otherwise), read into *out. */
int it_publish_capture(it_published *out, char **err, it_env *e, const char *stdin_path, ...)
    __attribute__((sentinel));

/* Sum of the JSON summary lines the hosts appended to a --summary-file.
 * Missing keys count 0. */
typedef struct it_summary {
    long lines;
    long received, handled, duplicates, retried, rejected, unhandled, dead_lettered, acked, naked,
        busy, leftovers, pull_requests;
    int worst_exit; /* largest "exit" seen */
} it_summary;
bool it_summary_read(it_summary *out, const char *path);

/* Runs `ibus markers --recorder sqlite:<dir>/markers.db --consumer C
 * lookup ID`: 0 processed, 3 not processed, else an error. */
int it_marker_lookup(it_env *e, const char *consumer, const char *id);

/* Runs argv (named `name` for its logs) to completion within a minute
 * (longer under a sanitizer); returns its exit code, its stderr and, when
 * `out` is non-NULL, its stdout, as malloc'd text ("" when empty). */
int it_run_capture(char **err, char **out, it_env *e, const char *name, it_argv *a);

/* Fails the test unless `needle` is in `text`, showing both. */
void it_assert_contains(const char *text, const char *needle);

/* Polls GET /metrics on `port` until series `series` has the value `want`
 * or `ms` (tripled under a sanitizer) have passed; returns the last value
 * read (-1 when none). */
double it_wait_metric(it_env *e, int port, const char *series, double want, int64_t ms);

/* A port that was free on 127.0.0.1 a moment ago. */
int it_free_port(void);

/* GET http://127.0.0.1:PORT/PATH with curl; returns the HTTP status (0 when
 * curl failed) and the body in *body (malloc'd; may be NULL). */
int it_http_get(char **body, it_env *e, int port, const char *path);

/* Value of one Prometheus series, e.g. "ibus_events_handled_total" or
 * "ibus_dead_lettered_total{reason=\"decode\"}"; false when absent. */
bool it_prom_value(double *out, const char *body, const char *series);

/* Fresh uuid4 ids, one per line, into `path`; the ids also in *ids
 * (it_lines_free). */
bool it_make_ids(char ***ids, size_t n, const char *path);

/* Writes one JSON line per id: {"type":TYPE,"payload":PAYLOAD,"id":ID}, for
 * `ibus publish` on stdin. */
bool it_write_jsonl(const char *path, char *const *ids, size_t n, const char *type,
                    const char *payload);

/* Like it_write_jsonl, with a payload of its own per id (payloads[i]
 * for ids[i], JSON-escaped: quotes and backslashes only). */
bool it_write_jsonl_each(const char *path, char *const *ids, char *const *payloads, size_t n,
                         const char *type);

/* Waits until the consumer is idle (it_wait_consumer_idle, failing the
 * test after timeout_ms), then stops every host in `hosts` with SIGTERM and
 * asserts each exits 0. */
void it_finish_hosts(it_env *e, const char *durable, it_proc *hosts, size_t n, int64_t timeout_ms);

/* Comparison of the lines a handler wrote with the ids it had to handle.
 * A line counts when its field 0 equals `consumer` (NULL: any) and, for
 * scripted logs, field 4 equals `verdict` (NULL: any); the id is field 1. */
typedef struct it_tally {
    size_t expected;   /* distinct ids in the ids file */
    size_t lines;      /* lines that count */
    size_t distinct;   /* distinct ids among them */
    size_t missing;    /* expected ids without a line */
    size_t unexpected; /* lines whose id was not expected */
    size_t repeated;   /* ids with more than one line */
    size_t extra;      /* lines beyond the first per id */
} it_tally;
bool it_tally_file(it_tally *out, const char *log_path, const char *ids_path, const char *consumer,
                   const char *verdict, size_t print_repeats);

#endif
