/* SPDX-License-Identifier: Apache-2.0 */
/* ledger: account balances kept exactly once, in the marker file itself.
 *
 * Handler "apply" on ledger.entry is transactional (IB_HANDLER_TRANSACTIONAL):
 * it runs inside the sqlite: recorder's transaction, so its balance update
 * commits together with the event's marker, or not at all. A crash at any
 * moment leaves both or neither: no entry is ever applied twice or lost.
 *
 * Payload: "ACCOUNT AMOUNT" (ASCII, one space), ACCOUNT 1-64 bytes of
 * [A-Za-z0-9._-], AMOUNT a signed decimal int64 ("-250", "+7", "12"). The
 * handler adds AMOUNT to the account's row of ledger_balances (created on
 * first use in the marker file) and publishes a ledger.posted event with
 * payload "ACCOUNT AMOUNT NEWBALANCE" (decimal, no '+') and the id
 * derive_id(event id, "ledger.posted"). That event goes to the host's outbox
 * in the same transaction and is sent after the commit.
 *
 * Verdicts: a malformed payload, or a sum beyond int64, is REJECT
 * (dead-lettered: it can never apply). No transaction (a host older than
 * ABI 1.2, or a handler not run as transactional), an SQLite error or a
 * failed publish is RETRY: the writes roll back and the event comes again.
 *
 * Needs the sqlite: recorder (ibus refuses to start with any other) and
 * links the system's shared libsqlite3, the copy the host uses. No config.
 *   ibus run --recorder sqlite:markers.db --plugin ledger.so ...
 */
#include <infinity_bus/plugin.h>

#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCOUNT_MAX 64
#define AMOUNT_MAX 20 /* sign and 19 digits */
#define POSTED_TYPE "ledger.posted"

typedef struct ledger {
    const ib_host_api *api;
} ledger;

/* One parsed entry. */
typedef struct entry {
    char account[ACCOUNT_MAX + 1];
    int64_t amount;
} entry;

/* What applying an entry came to. */
typedef enum outcome { APPLIED, OVERFLOW, DB_ERROR } outcome;

static bool is_account_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* Parses a signed decimal int64 of exactly `len` bytes; false on anything
 * else (no digits, other bytes, out of range). */
static bool parse_amount(int64_t *out, const char *s, size_t len)
{
    bool negative = false;
    uint64_t v = 0;
    uint64_t limit = (uint64_t)INT64_MAX;
    size_t i = 0;

    if (len > 0 && (s[0] == '-' || s[0] == '+')) {
        negative = s[0] == '-';
        i = 1;
    }
    if (i == len || len > AMOUNT_MAX)
        return false;
    if (negative)
        limit += 1; /* |INT64_MIN| */
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9 || v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (!negative)
        *out = (int64_t)v;
    else
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    return true;
}

/* Parses "ACCOUNT AMOUNT"; false when the payload has any other shape. */
static bool parse_entry(entry *out, const uint8_t *payload, size_t len)
{
    const char *p = (const char *)payload;
    size_t n = 0;

    if (payload == NULL)
        return false;
    while (n < len && n <= ACCOUNT_MAX && is_account_char((unsigned char)p[n]))
        n++;
    if (n == 0 || n > ACCOUNT_MAX || n == len || p[n] != ' ')
        return false;
    memcpy(out->account, p, n);
    out->account[n] = '\0';
    return parse_amount(&out->amount, p + n + 1, len - n - 1);
}

/* Runs `sql` with the account bound as ?1 and, if `amount` is non-NULL,
 * *amount as ?2. A row's first column goes to *row (when row is non-NULL)
 * and *found says whether there was one. Statements are prepared per call:
 * the connection belongs to the host, and a statement cached across calls
 * would outlive a connection it reopened. */
static int run(sqlite3 *db, const char *sql, const entry *e, const int64_t *amount, int64_t *row,
               bool *found)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, e->account, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && amount != NULL)
        rc = sqlite3_bind_int64(st, 2, *amount);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (found != NULL)
        *found = rc == SQLITE_ROW;
    if (rc == SQLITE_ROW && row != NULL)
        *row = sqlite3_column_int64(st, 0);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(st);
    return rc;
}

/* Adds the entry to its account inside the host's savepoint; the new
 * balance goes to *balance. The sum is checked in C: SQLite would turn an
 * overflowing integer sum into a float without a word. */
static outcome post(sqlite3 *db, const entry *e, int64_t *balance)
{
    int64_t old = 0;
    bool found = false;

    if (sqlite3_exec(db,
                     "CREATE TABLE IF NOT EXISTS ledger_balances("
                     "account TEXT PRIMARY KEY, balance INTEGER NOT NULL)",
                     NULL, NULL, NULL) != SQLITE_OK)
        return DB_ERROR;
    if (run(db, "SELECT balance FROM ledger_balances WHERE account = ?1", e, NULL, &old, &found) !=
        SQLITE_OK)
        return DB_ERROR;
    if (__builtin_add_overflow(old, e->amount, balance))
        return OVERFLOW;
    if (run(db,
            "INSERT INTO ledger_balances(account, balance) VALUES(?1, ?2) "
            "ON CONFLICT(account) DO UPDATE SET balance = excluded.balance",
            e, balance, NULL, NULL) != SQLITE_OK)
        return DB_ERROR;
    return APPLIED;
}

/* Stages ledger.posted under an id derived from the entry's, so a replay
 * of the entry (after a RETRY) stages the same event. */
static bool publish_posted(const ledger *l, ib_bus_proxy *bus, const ib_raw_event *ev,
                           const entry *e, int64_t balance)
{
    char id[IB_EVENT_ID_BUF_SIZE];
    char text[ACCOUNT_MAX + 2 * AMOUNT_MAX + 3];
    int n = snprintf(text, sizeof(text), "%s %" PRId64 " %" PRId64, e->account, e->amount, balance);
    ib_publish_request req = {
        .size = sizeof(req),
        .type = POSTED_TYPE,
        .payload = text,
        .payload_len = n > 0 ? (size_t)n : 0,
        .id = id,
    };

    l->api->derive_id(id, ib_raw_event_id(ev), POSTED_TYPE);
    return l->api->publish(bus, &req, NULL) == 0;
}

static ib_verdict ledger_apply(void *state, const uint8_t *payload, size_t payload_len,
                               ib_bus_proxy *bus, const ib_raw_event *ev)
{
    const ledger *l = state;
    const char *id = ib_raw_event_id(ev);
    sqlite3 *db;
    entry e;
    int64_t balance = 0;

    if (!parse_entry(&e, payload, payload_len)) {
        l->api->log(IB_LOG_WARN, "ledger", "event %s: payload is not \"ACCOUNT AMOUNT\"", id);
        return IB_HANDLER_REJECT;
    }
    db = l->api->transaction_db(bus);
    if (db == NULL) {
        l->api->log(IB_LOG_ERROR, "ledger",
                    "event %s: no transaction (host too old, or not run as transactional); "
                    "will retry",
                    id);
        return IB_HANDLER_RETRY;
    }
    switch (post(db, &e, &balance)) {
    case OVERFLOW:
        l->api->log(IB_LOG_WARN, "ledger", "event %s: balance of %s would leave int64", id,
                    e.account);
        return IB_HANDLER_REJECT;
    case DB_ERROR:
        l->api->log(IB_LOG_WARN, "ledger", "event %s: sqlite: %s; will retry", id,
                    sqlite3_errmsg(db));
        return IB_HANDLER_RETRY;
    case APPLIED:
        break;
    }
    if (!publish_posted(l, bus, ev, &e, balance)) {
        l->api->log(IB_LOG_WARN, "ledger", "event %s: staging " POSTED_TYPE " failed; will retry",
                    id);
        return IB_HANDLER_RETRY;
    }
    return IB_HANDLER_OK;
}

static int ledger_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                       size_t errlen)
{
    ledger *l;

    if (!IB_HOST_API_HAS(api, transaction_db) || api->log == NULL || api->publish == NULL ||
        api->derive_id == NULL || api->transaction_db == NULL) {
        snprintf(errbuf, errlen,
                 "the host offers no transaction_db (ABI 1.2), log, publish or derive_id");
        return -1;
    }
    if (config[0] != '\0') {
        snprintf(errbuf, errlen, "takes no configuration");
        return -1;
    }
    l = malloc(sizeof(*l));
    if (l == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    l->api = api;
    *state = l;
    return 0;
}

static void ledger_fini(void *state)
{
    free(state);
}

static const char *const ledger_types[] = {"ledger.entry", NULL};

static const ib_handler_desc ledger_handlers[] = {
    {.name = "apply",
     .event_types = ledger_types,
     .handle = ledger_apply,
     .flags = IB_HANDLER_TRANSACTIONAL},
};

static const ib_plugin_desc ledger_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "ledger",
    .version = "1.0.0",
    .description = "account balances and ledger.posted, exactly once, in the marker file",
    .init = ledger_init,
    .fini = ledger_fini,
    .handlers = ledger_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &ledger_desc;
}
