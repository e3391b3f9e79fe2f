/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite marker file the hosts share, seen from the test: its markers,
 * the outbox and a transactional plugin's tables, read (or, before a host
 * starts, written) through the system's SQLite.
 *
 * Every call opens its own connection and closes it before returning, so
 * the test never holds a lock or a read snapshot that would stall the
 * hosts' writers or their checkpoints between calls. A busy timeout covers
 * the moments a host holds the write lock. */
#ifndef IB_IT_DB_H
#define IB_IT_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* First column of the first row `sql` returns, as an integer. False, with
 * the reason on stderr, when the file cannot be opened or the statement
 * fails; false quietly when there is no row. A table not created yet is a
 * failure here: callers that poll treat false as "not yet". */
bool it_db_int(int64_t *out, const char *path, const char *sql);

/* Polls it_db_int until it reads `want` or timeout_ms passes; returns the
 * last value read (-1 when none could be). */
int64_t it_db_wait_int(const char *path, const char *sql, int64_t want, int64_t timeout_ms);

/* Calls `row` once per row `sql` returns, with the row's columns as text
 * (NULL for SQL NULL; at most 16 columns). Returns the number of rows, or
 * -1 (reason on stderr) when the file or the statement fails. */
typedef void (*it_db_row_fn)(void *ctx, int ncol, const char *const *cols);
long it_db_rows(const char *path, const char *sql, it_db_row_fn row, void *ctx);

/* Runs `sql` (one or more statements). False, with the reason on
 * stderr, on error. No call here creates the file. */
bool it_db_exec(const char *path, const char *sql);

/* `len` bytes as an SQL blob literal X'..' into a malloc'd string (the
 * caller frees it), for it_db_exec statements that store bytes. */
char *it_db_blob_literal(const void *data, size_t len);

#endif
