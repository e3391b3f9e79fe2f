/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: the schema of the marker file (described at the top of sqlite.c),
 * created from one list of objects, and the migration of every older layout
 * into it.
 *
 * Versions before 7, all migrated in place in the opening transaction:
 *   0  an empty file, or the seed's layout: a rowid processed_log table, ts
 *      in seconds (possibly REAL or text);
 *   1  processed_log WITHOUT ROWID with ts in unix ms; processed_claims
 *      whose expiries are wall-clock times (ended by the migration);
 *   2  claims count attempts, leases on the boot clock;
 *   3  processed_log.fp and processed_outbox;
 *   4  processed_markers plus an append-only journal, processed_log a view
 *      over both;
 *   5  the journal's counts, reader registry and seed trigger;
 *   6  version 7 without processed_spellings: the spellings the seed wrote
 *      before are not known (its ids were normalised), only those after.
 * A migration from 0 to 5 copies the old layout's markers and live claims (as version 5
 * answered them: the journal's newest states over the B-trees) into the new
 * tables in key order, keeps the outbox, and drops every old object. It
 * rewrites the file's markers once, under the write lock: about a second
 * per million markers. */
#include "sqlite_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* How the seed's INSERT reads a ts, and how a migration of the seed's
 * table does: numbers below 1e11 are seconds (time.time()), larger ones ms,
 * ISO dates UTC; anything else becomes `now` so an unknown marker is kept
 * a full retention window rather than pruned first. %s is the value. */
#define TS_MS(v, now)                                                                              \
    "CASE WHEN typeof(" v ") IN ('integer', 'real') AND abs(" v ") < 1e11 "                        \
    "THEN CAST(round(" v " * 1000) AS INTEGER) "                                                   \
    "WHEN typeof(" v ") IN ('integer', 'real') THEN CAST(" v " AS INTEGER) "                       \
    "WHEN typeof(" v ") = 'text' AND " v " GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*' "    \
    "THEN CAST(round((julianday(" v ") - 2440587.5) * 86400000) AS INTEGER) "                      \
    "WHEN typeof(" v ") = 'text' AND trim(" v ") GLOB '[0-9]*' "                                   \
    "AND CAST(trim(" v ") AS REAL) < 1e11 THEN CAST(round(CAST(trim(" v ") AS REAL) * 1000) "      \
    "AS INTEGER) "                                                                                 \
    "WHEN typeof(" v ") = 'text' AND trim(" v ") GLOB '[0-9]*' "                                   \
    "THEN CAST(trim(" v ") AS INTEGER) ELSE " now " END"

/* A consumer and an id another tool wrote are used only when they are
 * text without a NUL byte (SQLite's text functions stop at one), the
 * consumer 1-255 bytes, the id 32 hex digits once dashes are dropped. */
#define VALID_CONSUMER(c)                                                                          \
    "(typeof(" c ") = 'text' AND length(CAST(" c " AS BLOB)) BETWEEN 1 AND 255 "                   \
    "AND instr(CAST(" c " AS BLOB), X'00') = 0)"
#define VALID_ID(e)                                                                                \
    "(typeof(" e ") = 'text' AND instr(CAST(" e " AS BLOB), X'00') = 0 "                           \
    "AND length(CAST(replace(" e ", '-', '') AS BLOB)) = 32 "                                      \
    "AND lower(replace(" e ", '-', '')) NOT GLOB '*[^0-9a-f]*')"
#define NORMAL_ID(e) "lower(replace(" e ", '-', ''))"
#define CID_OF(c) "(SELECT cid FROM processed_consumers WHERE name = " c ")"
/* The seed's row as processed_log_insert reads it. */
#define SEED_TS TS_MS("NEW.ts", "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)")
#define SEED_MARKER                                                                                \
    "(SELECT 1 FROM processed_markers WHERE cid = " CID_OF(                                        \
        "NEW.consumer") " AND event_id = " NORMAL_ID("NEW.event_id") ")"

#define OLD_MARKER                                                                                 \
    "(SELECT 1 FROM processed_markers WHERE cid = " CID_OF(                                        \
        "OLD.consumer") " AND event_id = " NORMAL_ID("OLD.event_id") ")"

/* The objects of version 7, in creation order: the one list the schema
 * check and the transactional guard (ib__sqlite_schema_owns) read. */
typedef struct schema_object {
    const char *name;
    const char *type;
    const char *sql;
} schema_object;

/* clang-format off */
static const schema_object objects[] = {
    {"processed_consumers", "table",
     "CREATE TABLE processed_consumers (\n"
     "    cid INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused\n"
     "    name TEXT NOT NULL UNIQUE, -- <durable>/<plugin>/<handler>\n"
     "    markers INTEGER NOT NULL DEFAULT 0, -- its rows in processed_markers\n"
     "    oldest_ms INTEGER, -- none of them is older (a bound once some were deleted)\n"
     "    newest_ms INTEGER -- none is newer\n"
     ")"},
    {"processed_markers", "table",
     "CREATE TABLE processed_markers (\n"
     "    cid INTEGER NOT NULL, -- processed_consumers.cid\n"
     "    event_id TEXT NOT NULL, -- 32 lowercase hex digits\n"
     "    ts INTEGER NOT NULL, -- unix milliseconds when marked\n"
     "    fp INTEGER, -- payload fingerprint, top 32 bits, signed; NULL = none\n"
     "    PRIMARY KEY (event_id, cid)\n"
     ") WITHOUT ROWID"},
    {"processed_claims", "table",
     "CREATE TABLE processed_claims (\n"
     "    cid INTEGER NOT NULL,\n"
     "    event_id TEXT NOT NULL,\n"
     "    owner TEXT NOT NULL, -- the holder's token; '' = released\n"
     "    expires_ms INTEGER NOT NULL, -- lease end, lease clock (ms since boot)\n"
     "    attempts INTEGER NOT NULL, -- handler attempts since the last dead letter\n"
     "    PRIMARY KEY (event_id, cid)\n"
     ") WITHOUT ROWID"},
    {"processed_outbox", "table",
     "CREATE TABLE processed_outbox (\n"
     "    seq INTEGER PRIMARY KEY AUTOINCREMENT,\n"
     "    subject TEXT NOT NULL,\n"
     "    msg_id TEXT NOT NULL, -- sent as Nats-Msg-Id\n"
     "    data BLOB NOT NULL,\n"
     "    staged_ms INTEGER NOT NULL -- unix milliseconds when staged\n"
     ")"},
    {"sqlite_sequence", "table", NULL}, /* SQLite's, for AUTOINCREMENT */
    {"processed_spellings", "table",
     "CREATE TABLE processed_spellings (\n"
     "    spelling TEXT NOT NULL, -- an id as the seed wrote it, not normalised\n"
     "    cid INTEGER NOT NULL,\n"
     "    event_id TEXT NOT NULL, -- the normalised id: processed_markers.event_id\n"
     "    PRIMARY KEY (spelling, cid)\n"
     ") WITHOUT ROWID"},
    /* Each marker under its id, and again under every other spelling the
     * seed wrote it with: the seed's WHERE event_id = ? finds either by a
     * primary key. */
    {"processed_log", "view",
     "CREATE VIEW processed_log (consumer, event_id, ts) AS\n"
     "SELECT c.name, m.event_id, m.ts FROM processed_markers m\n"
     "JOIN processed_consumers c ON c.cid = m.cid\n"
     "UNION ALL\n"
     "SELECT c.name, a.spelling, m.ts FROM processed_spellings a\n"
     "JOIN processed_markers m ON m.event_id = a.event_id AND m.cid = a.cid\n"
     "JOIN processed_consumers c ON c.cid = a.cid"},
    /* No statement here can meet a conflict, so the outer statement's
     * policy (INSERT OR REPLACE would delete a consumer's row) never
     * applies. */
    {"processed_log_insert", "trigger",
     "CREATE TRIGGER processed_log_insert INSTEAD OF INSERT ON processed_log BEGIN\n"
     "  SELECT RAISE(ABORT, 'processed_log: consumer must be 1 to 255 bytes of text and "
     "event_id a uuid (32 hex digits, dashes allowed), neither with a NUL byte')\n"
     "   WHERE NOT " VALID_CONSUMER("NEW.consumer") " OR NOT " VALID_ID("NEW.event_id") ";\n"
     "  INSERT INTO processed_consumers (name) SELECT NEW.consumer\n"
     "   WHERE NOT EXISTS (SELECT 1 FROM processed_consumers WHERE name = NEW.consumer);\n"
     "  UPDATE processed_consumers SET markers = markers + 1,\n"
     "    oldest_ms = min(coalesce(oldest_ms, " SEED_TS "), " SEED_TS "),\n"
     "    newest_ms = max(coalesce(newest_ms, " SEED_TS "), " SEED_TS ")\n"
     "   WHERE name = NEW.consumer AND NOT EXISTS " SEED_MARKER ";\n"
     "  INSERT INTO processed_markers (cid, event_id, ts)\n"
     "   SELECT " CID_OF("NEW.consumer") ", " NORMAL_ID("NEW.event_id") ", " SEED_TS "\n"
     "   WHERE NOT EXISTS " SEED_MARKER ";\n"
     "  DELETE FROM processed_claims\n"
     "   WHERE cid = " CID_OF("NEW.consumer") " AND event_id = " NORMAL_ID("NEW.event_id") ";\n"
     "  INSERT INTO processed_spellings (spelling, cid, event_id)\n"
     "   SELECT NEW.event_id, " CID_OF("NEW.consumer") ", " NORMAL_ID("NEW.event_id") "\n"
     "   WHERE NEW.event_id <> " NORMAL_ID("NEW.event_id") " AND NOT EXISTS (SELECT 1 FROM\n"
     "   processed_spellings WHERE spelling = NEW.event_id AND cid = " CID_OF("NEW.consumer") ");\n"
     "END"},
    {"processed_log_delete", "trigger",
     "CREATE TRIGGER processed_log_delete INSTEAD OF DELETE ON processed_log BEGIN\n"
     "  UPDATE processed_consumers SET markers = max(markers - 1, 0) WHERE name = OLD.consumer\n"
     "   AND EXISTS " OLD_MARKER ";\n"
     "  DELETE FROM processed_markers\n"
     "   WHERE cid = " CID_OF("OLD.consumer") " AND event_id = " NORMAL_ID("OLD.event_id") ";\n"
     "  DELETE FROM processed_spellings\n"
     "   WHERE spelling = OLD.event_id AND cid = " CID_OF("OLD.consumer") ";\n"
     "END"},
};
/* clang-format on */

#define N_OBJECTS (sizeof(objects) / sizeof(objects[0]))
/* objects[SPELLINGS] is processed_spellings: the view and triggers follow. */
#define SPELLINGS 5

bool ib__sqlite_schema_owns(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_OBJECTS; i++)
        if (strcasecmp(name, objects[i].name) == 0)
            return true;
    return false;
}

static int refuse(ib_error *err, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills `err` with IB_ERR_SCHEMA, "recorder <name>: <reason>". */
static int refuse(ib_error *err, const char *name, const char *fmt, ...)
{
    char reason[IB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    ib_error_set(err, IB_ERR_SCHEMA, "recorder %s: %s", name, reason);
    return IB__SQLITE_REFUSED;
}

static int exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Whether an object of `type` named `name` exists. */
static int exists(sqlite3 *db, const char *type, const char *name, bool *out)
{
    char *sql = sqlite3_mprintf("SELECT count(*) FROM sqlite_master WHERE type = %Q AND name = %Q",
                                type, name);
    long long n = 0;
    if (sql == NULL)
        return SQLITE_NOMEM;
    int rc = ib__sqlite_read_value(db, sql, &n, NULL, 0);
    sqlite3_free(sql);
    *out = n > 0;
    return rc;
}

/* Creates the objects from `from` on. */
static int create_objects(sqlite3 *db, size_t from)
{
    int rc = SQLITE_OK;
    for (size_t i = from; rc == SQLITE_OK && i < N_OBJECTS; i++)
        if (objects[i].sql != NULL)
            rc = exec(db, objects[i].sql);
    return rc;
}

/* A file at the current version must have every object of the list. */
static int check_current(sqlite3 *db, const char *name, ib_error *err)
{
    for (size_t i = 0; i < N_OBJECTS; i++) {
        bool there = false;
        int rc = exists(db, objects[i].type, objects[i].name, &there);
        if (rc != SQLITE_OK)
            return rc;
        if (!there)
            return refuse(err, name, "schema version %d but its %s %s is missing",
                          IB__SQLITE_SCHEMA_VERSION, objects[i].type, objects[i].name);
    }
    return SQLITE_OK;
}

/* ---- migration ------------------------------------------------------------ */

/* Where an old layout keeps its markers and live claims, as SELECTs of
 * (consumer, event_id, ts, fp) and (consumer, event_id, owner, expires_ms,
 * attempts); NULL claims = none worth keeping. */
typedef struct old_layout {
    const char *markers;
    const char *claims;
    const char *tables; /* what it must have, for the check */
} old_layout;

#define CLAIMS_TABLE "SELECT consumer, event_id, owner, expires_ms, attempts FROM processed_claims"
/* Version 4 and 5: the journal's newest state of a key wins over the
 * B-tree's (SQLite takes the bare columns of max() from its row). */
#define CLAIMS_JOURNAL                                                                             \
    CLAIMS_TABLE " WHERE (consumer, event_id) NOT IN (SELECT consumer, event_id FROM "             \
                 "processed_states) UNION ALL SELECT consumer, event_id, owner, expires_ms, "      \
                 "attempts FROM (SELECT consumer, event_id, done, owner, expires_ms, attempts, "   \
                 "max(pos) FROM processed_states GROUP BY consumer, event_id) WHERE done = 0"

static const old_layout layouts[6] = {
    [0] = {"SELECT consumer, event_id, " TS_MS("ts", "%lld") " AS ts, NULL AS fp FROM "
                                                             "processed_log",
           NULL, "processed_log"},
    /* version 1's expiries are wall-clock times: those claims are over */
    [1] = {"SELECT consumer, event_id, ts, NULL AS fp FROM processed_log", NULL,
           "processed_log processed_claims"},
    [2] = {"SELECT consumer, event_id, ts, NULL AS fp FROM processed_log", CLAIMS_TABLE,
           "processed_log processed_claims"},
    [3] = {"SELECT consumer, event_id, ts, fp FROM processed_log", CLAIMS_TABLE,
           "processed_log processed_claims processed_outbox"},
    [4] = {"SELECT consumer, event_id, ts, fp FROM processed_log", CLAIMS_JOURNAL,
           "processed_markers processed_claims processed_outbox processed_journal "
           "processed_merge processed_states"},
    [5] = {"SELECT consumer, event_id, ts, fp FROM processed_log", CLAIMS_JOURNAL,
           "processed_markers processed_claims processed_outbox processed_journal "
           "processed_merge processed_states processed_counts processed_readers"},
};

/* Every object a layout before 6 may have had, dropped after the copy. */
static const char *const old_objects[] = {
    "processed_log_insert", "processed_log",    "processed_states",
    "processed_markers",    "processed_claims", "processed_journal",
    "processed_merge",      "processed_counts", "processed_readers",
};

/* Drops the old objects that exist, each as what it is (a table, a view or
 * a trigger). */
static int drop_old(sqlite3 *db)
{
    for (size_t i = 0; i < sizeof(old_objects) / sizeof(old_objects[0]); i++) {
        char type[16] = "";
        char *sql =
            sqlite3_mprintf("SELECT type FROM sqlite_master WHERE name = %Q", old_objects[i]);
        if (sql == NULL)
            return SQLITE_NOMEM;
        int rc = ib__sqlite_read_value(db, sql, NULL, type, sizeof(type));
        sqlite3_free(sql);
        if (rc == SQLITE_DONE || (rc == SQLITE_OK && type[0] == '\0'))
            continue;
        if (rc != SQLITE_OK)
            return rc;
        sql = sqlite3_mprintf("DROP %s %s", type, old_objects[i]);
        if (sql == NULL)
            return SQLITE_NOMEM;
        rc = exec(db, sql);
        sqlite3_free(sql);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* Tables some version before 6 had, and the one version 7 added. One its
 * own version never had was made by someone else, and the migration would
 * drop it or fail on it: refused. */
static const char *const old_tables[] = {"processed_claims",  "processed_outbox",
                                         "processed_markers", "processed_journal",
                                         "processed_merge",   "processed_spellings"};

static int check_foreign(sqlite3 *db, const char *name, long long version, ib_error *err)
{
    char own[256];
    snprintf(own, sizeof(own), " %s ", layouts[version].tables);
    for (size_t i = 0; i < sizeof(old_tables) / sizeof(old_tables[0]); i++) {
        char padded[64];
        bool there = false;
        snprintf(padded, sizeof(padded), " %s ", old_tables[i]);
        int rc =
            strstr(own, padded) != NULL ? SQLITE_OK : exists(db, "table", old_tables[i], &there);
        if (rc != SQLITE_OK)
            return rc;
        if (there)
            return refuse(err, name,
                          "schema version %lld with a %s table that version never had: "
                          "this build did not create it",
                          version, old_tables[i]);
    }
    return SQLITE_OK;
}

/* Refuses a file whose version names tables it lacks, or whose
 * processed_log lacks the seed's columns: not a layout this build can
 * migrate. */
static int check_old(sqlite3 *db, const char *name, long long version, ib_error *err)
{
    char list[256];
    int rc = SQLITE_OK;
    snprintf(list, sizeof(list), "%s", layouts[version].tables);
    for (char *save = NULL, *t = strtok_r(list, " ", &save); t != NULL && rc == SQLITE_OK;
         t = strtok_r(NULL, " ", &save)) {
        bool table = false, view = false;
        rc = exists(db, "table", t, &table);
        if (rc == SQLITE_OK && !table)
            rc = exists(db, "view", t, &view);
        if (rc == SQLITE_OK && !table && !view)
            return refuse(err, name,
                          "schema version %lld but %s is missing: not a layout "
                          "this build can migrate",
                          version, t);
    }
    sqlite3_stmt *probe = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "SELECT consumer, event_id, ts FROM processed_log LIMIT 0", -1,
                                &probe, NULL);
    sqlite3_finalize(probe);
    if (rc == SQLITE_ERROR)
        return refuse(err, name,
                      "processed_log lacks a consumer, event_id or ts column: not a "
                      "layout this build can migrate");
    return rc;
}

/* ib__sq_fp_stored in SQL: the top half (>> keeps the sign), 0 = none. */
#define FP32(f)                                                                                    \
    "CASE WHEN " f " IS NULL OR " f " = 0 THEN NULL WHEN (" f " >> 32) = 0 THEN 1 "                \
    "ELSE " f " >> 32 END"
#define NO_CLAIMS                                                                                  \
    "SELECT NULL AS consumer, NULL AS event_id, NULL AS owner, NULL AS expires_ms, "               \
    "NULL AS attempts WHERE 0"

/* Copies the old markers and claims into the new consumers table and into
 * ib_new_markers and ib_new_claims, in key order (so the new B-trees are
 * written sequentially and their pages end up full). */
static int copy_rows(sqlite3 *db, const old_layout *l, int64_t now_ms)
{
    const char *claims = l->claims != NULL ? l->claims : NO_CLAIMS;
    char *markers = sqlite3_mprintf(l->markers, (long long)now_ms);
    if (markers == NULL)
        return SQLITE_NOMEM;
    /* clang-format off */
    char *sql = sqlite3_mprintf(
        "INSERT INTO processed_consumers (name) SELECT c FROM (SELECT consumer AS c FROM (%s) "
        " UNION SELECT consumer FROM (%s)) WHERE " VALID_CONSUMER("c") " ORDER BY c;"
        "INSERT OR IGNORE INTO ib_new_markers SELECT k.cid, " NORMAL_ID("o.event_id") ","
        " CAST(o.ts AS INTEGER), " FP32("o.fp") " FROM (%s) o"
        " JOIN processed_consumers k ON k.name = o.consumer"
        " WHERE " VALID_ID("o.event_id") " AND o.ts IS NOT NULL ORDER BY 1, 2;"
        "INSERT OR IGNORE INTO ib_new_claims SELECT k.cid, " NORMAL_ID("o.event_id") ","
        " o.owner, CAST(o.expires_ms AS INTEGER), max(CAST(o.attempts AS INTEGER), 0) FROM (%s) o"
        " JOIN processed_consumers k ON k.name = o.consumer WHERE " VALID_ID("o.event_id")
        " AND typeof(o.owner) = 'text' AND (o.owner <> '' OR o.attempts > 0) ORDER BY 1, 2;"
        "INSERT OR IGNORE INTO processed_spellings SELECT o.event_id, k.cid, "
        NORMAL_ID("o.event_id") " FROM (%s) o JOIN processed_consumers k ON k.name = o.consumer"
        " WHERE " VALID_ID("o.event_id") " AND o.event_id <> " NORMAL_ID("o.event_id")
        " ORDER BY 1, 2;",
        markers, claims, markers, claims, markers);
    /* clang-format on */
    sqlite3_free(markers);
    if (sql == NULL)
        return SQLITE_NOMEM;
    int rc = exec(db, sql);
    sqlite3_free(sql);
    return rc;
}

/* `objects[i]`'s CREATE TABLE under the name `as`. */
static int create_as(sqlite3 *db, size_t i, const char *as)
{
    const char *rest = objects[i].sql + strlen("CREATE TABLE ") + strlen(objects[i].name);
    char *sql = sqlite3_mprintf("CREATE TABLE %s%s", as, rest);
    if (sql == NULL)
        return SQLITE_NOMEM;
    int rc = exec(db, sql);
    sqlite3_free(sql);
    return rc;
}

/* Versions 0 to 5: the new tables beside the old, the rows copied (and the
 * spellings of ids that were not normalised), the old objects dropped, the
 * new tables renamed, then the triggers and the view. */
static int migrate(sqlite3 *db, long long version, bool has_outbox, int64_t now_ms)
{
    int rc = exec(db, objects[0].sql);
    if (rc == SQLITE_OK)
        rc = create_as(db, 1, "ib_new_markers");
    if (rc == SQLITE_OK)
        rc = create_as(db, 2, "ib_new_claims");
    if (rc == SQLITE_OK)
        rc = exec(db, objects[SPELLINGS].sql);
    if (rc == SQLITE_OK)
        rc = copy_rows(db, &layouts[version], now_ms);
    if (rc == SQLITE_OK)
        rc = drop_old(db);
    if (rc == SQLITE_OK)
        rc = exec(db, "ALTER TABLE ib_new_markers RENAME TO processed_markers;"
                      "ALTER TABLE ib_new_claims RENAME TO processed_claims;");
    if (rc == SQLITE_OK && !has_outbox)
        rc = exec(db, objects[3].sql);
    if (rc == SQLITE_OK)
        rc = create_objects(db, SPELLINGS + 1);
    /* the counts of what was copied, in one pass */
    if (rc == SQLITE_OK)
        rc = exec(db, "UPDATE processed_consumers SET (markers, oldest_ms, newest_ms) = "
                      "(SELECT count(*), min(ts), max(ts) FROM processed_markers m "
                      "WHERE m.cid = processed_consumers.cid)");
    return rc;
}

/* Version 6 had every table but the spellings: those added, the view and
 * its triggers made again. Nothing is copied. */
static int upgrade_6(sqlite3 *db, const char *name, ib_error *err)
{
    bool there = false;
    int rc = exists(db, "table", "processed_spellings", &there);
    if (rc != SQLITE_OK)
        return rc;
    if (there)
        return refuse(err, name,
                      "schema version 6 with a processed_spellings table that version never "
                      "had: this build did not create it");
    rc = exec(db, "DROP VIEW IF EXISTS processed_log");
    return rc == SQLITE_OK ? create_objects(db, SPELLINGS) : rc;
}

int ib__sqlite_schema_ensure(sqlite3 *db, const char *name, int64_t now_ms, ib_error *err)
{
    long long version = 0;
    bool outbox = false, log = false;
    int rc = ib__sqlite_read_value(db, "PRAGMA user_version", &version, NULL, 0);
    if (rc == SQLITE_OK)
        rc = exists(db, "table", "processed_outbox", &outbox);
    if (rc == SQLITE_OK)
        rc = exists(db, "table", "processed_log", &log);
    if (rc != SQLITE_OK)
        return rc;
    if (version > IB__SQLITE_SCHEMA_VERSION || version < 0)
        return refuse(err, name,
                      "schema version %lld is newer than this build understands (%d); "
                      "upgrade infinity-bus or use another file",
                      version, IB__SQLITE_SCHEMA_VERSION);
    if (version == IB__SQLITE_SCHEMA_VERSION)
        return check_current(db, name, err);
    if (version == 6)
        rc = upgrade_6(db, name, err);
    else if ((rc = check_foreign(db, name, version, err)) != SQLITE_OK)
        return rc;
    else if (version == 0 && !log)
        rc = create_objects(db, 0);
    else if ((rc = check_old(db, name, version, err)) == SQLITE_OK)
        rc = migrate(db, version, outbox, now_ms);
    if (rc != SQLITE_OK)
        return rc;
    return ib__sqlite_exec_fmt(db, "PRAGMA user_version = %lld", IB__SQLITE_SCHEMA_VERSION);
}
