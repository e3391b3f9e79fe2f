/* SPDX-License-Identifier: Apache-2.0 */
/* The seed's own SQL, run by the model test's parent beside the workers
 * through a plain SQLite connection, the way the seed's Python recorder
 * runs it (sqlite3's defaults: a deferred transaction around each INSERT,
 * committed at once):
 *
 *   CREATE TABLE IF NOT EXISTS processed_log (consumer TEXT NOT NULL,
 *     event_id TEXT NOT NULL, ts REAL NOT NULL, PRIMARY KEY (consumer, event_id))
 *   SELECT 1 FROM processed_log WHERE consumer = ? AND event_id = ?
 *   INSERT OR IGNORE INTO processed_log (consumer, event_id, ts) VALUES (?, ?, ?)
 */
#ifndef IB_MODEL_SEED_H
#define IB_MODEL_SEED_H

#include <stdbool.h>
#include <stddef.h>

typedef struct seed_db seed_db;

/* Opens (creating it 0600 if missing) `path` and runs the CREATE.
 * Returns 0, or -1 with SQLite's reason in `why`. */
int seed_open(seed_db **out, const char *path, int busy_timeout_ms, char *why, size_t why_len);

void seed_close(seed_db *s);

/* The INSERT of (consumer, the `id_len` bytes of id, ts seconds), in its
 * own transaction. Returns SQLITE_OK once committed, else the SQLite code;
 * a transaction that did not commit is left open for seed_end_transaction. */
int seed_insert(seed_db *s, const char *consumer, const char *id, size_t id_len, double ts);

/* Rolls back a transaction seed_insert left open. Call it with no fault
 * armed: a ROLLBACK that failed under an injected fault left the
 * connection inside the transaction, where its later SELECTs saw its own
 * uncommitted row and an old snapshot (two model violations in 300 seeds
 * that were the test's, not the recorder's). Returns false if the
 * connection is still in a transaction. */
bool seed_end_transaction(seed_db *s);

/* The SELECT. Returns SQLITE_OK with *found, else the SQLite code. */
int seed_select(seed_db *s, bool *found, const char *consumer, const char *id);

/* PRAGMA integrity_check: 0 when it says "ok", else -1 with its first
 * line (or the error) in `out`. */
int seed_integrity(seed_db *s, char *out, size_t len);

/* SQLite's message for the connection's last error. */
const char *seed_errmsg(seed_db *s);

#endif
