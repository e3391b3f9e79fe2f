/* Internals of the sqlite: recorder shared by its files and its tests. */
#ifndef IB_SQLITE_INTERNAL_H
#define IB_SQLITE_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "recorder.h"

/* PRAGMA user_version this build writes and understands.
 *   0: no schema yet, or the seed's layout: a rowid processed_log table,
 *      ts in seconds (possibly REAL); migrated in place.
 *   1: processed_log WITHOUT ROWID, ts INTEGER unix ms; processed_claims. */
#define IB__SQLITE_SCHEMA_VERSION 2

/* Returned by ib__sqlite_schema_ensure when the file cannot be used and
 * retrying will not help; `err` says why (IB_ERR_SCHEMA). Not an SQLite
 * code. */
#define IB__SQLITE_REFUSED (-1)

/* Brings the schema of `db` to IB__SQLITE_SCHEMA_VERSION, creating or
 * migrating in place. Must run inside a write transaction (BEGIN IMMEDIATE)
 * the caller holds and commits. `name` ("sqlite:PATH") is for messages;
 * `now_ms` stands in for marker times the old layout lacks. Returns
 * SQLITE_OK, an SQLite error code (the caller rolls back; BUSY may be
 * retried) or IB__SQLITE_REFUSED. */
int ib__sqlite_schema_ensure(sqlite3 *db, const char *name, int64_t now_ms, ib_error *err);

/* Runs `sql` (a PRAGMA or a SELECT) and reads column 0 of its first row:
 * as an integer into `*num` and as text into `text` (`text_size` bytes,
 * cut and NUL-terminated); either may be NULL. Returns SQLITE_OK, or the
 * SQLite error code; a statement that returns no row gives SQLITE_DONE and
 * leaves both untouched. */
int ib__sqlite_read_value(sqlite3 *db, const char *sql, long long *num, char *text,
                          size_t text_size);

/* Checks the marker file at `path` (not ":memory:") before SQLite opens it
 * (sqlite_file.c). Always refused: a symbolic link as the file, as its -wal
 * or -shm file or as a directory of `path`, and a file that is not a
 * regular one. Unless `allow_insecure`: an existing file, -wal or -shm file
 * owned by anyone but `self_uid` (root included, unless that is us) or
 * writable by group or others, and, when there is no file yet, a
 * `new_mode` that would make it so. `self_uid` is the running user
 * (geteuid()); tests pass another. `name` ("sqlite:PATH") is for messages:
 * "recorder <name>: <reason>; fix with chown/chmod or allow an insecure
 * marker file". Returns IB_OK, IB_ERR_CONFIG for a refusal or
 * IB_ERR_IO when a file cannot be inspected. */
ib_status ib__sqlite_check_file(const char *path, const char *name, unsigned new_mode,
                                bool allow_insecure, uid_t self_uid, ib_error *err);

/* Test and diagnostics hooks; NULL / no-op for other kinds. */

/* The recorder's connection (BORROWED; do not close, do not use while
 * another thread calls the recorder). */
sqlite3 *ib__sqlite_db(ib_recorder *r);

/* Rows examined per prune transaction (default 2000). */
void ib__sqlite_set_prune_batch(ib_recorder *r, unsigned rows);

/* Transactions the last prune committed. */
uint64_t ib__sqlite_prune_transactions(ib_recorder *r);

#endif
