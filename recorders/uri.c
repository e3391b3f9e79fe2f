/* SPDX-License-Identifier: Apache-2.0 */
/* Recorder URIs (spec section 2):
 *
 *   memory:[?capacity=N]
 *   sqlite:PATH[?synchronous=off|normal|full|extra&busy_timeout_ms=N&mode=0NNN]
 *   sqlite::memory:
 *   kv:BUCKET[?replicas=N&ttl=D&min_ttl=D&max_bytes=N&create=0|1&url=URL&creds=PATH
 *             &domain=NAME|api_prefix=PREFIX]
 *
 * The scheme is matched without regard to case. The first '?' starts the
 * parameters, so a path cannot contain '?'; there is no percent-decoding.
 * Every parameter may appear once. Parsing touches nothing outside its
 * arguments, which is what lets it be fuzzed. */
#include "recorder_internal.h"
#include "clock.h"
#include "redact.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define DEFAULT_BUSY_TIMEOUT_MS 10000
#define DEFAULT_FILE_MODE 0600u
/* How much of a URI an error message repeats. */
#define QUOTE_MAX 96

typedef struct parse_ctx {
    const char *uri;
    char quoted[QUOTE_MAX + 4];
    ib_error *err;
} parse_ctx;

/* A copy of the URI that is safe to print: redacted (no userinfo or query
 * values: a url= may carry a password), bounded, control bytes masked. */
static void quote_uri(char *out, const char *full)
{
    char uri[IB_REDACT_MAX];
    ib_redact_url(uri, sizeof(uri), full);
    size_t n = 0;
    for (; uri[n] != '\0' && n < QUOTE_MAX; n++) {
        unsigned char c = (unsigned char)uri[n];
        out[n] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (uri[n] != '\0') {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

static ib_status fail(parse_ctx *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* IB_ERR_CONFIG with "recorder URI '<uri>': <reason>". */
static ib_status fail(parse_ctx *pc, const char *fmt, ...)
{
    char reason[IB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    return ib_error_set(pc->err, IB_ERR_CONFIG, "recorder URI '%s': %s", pc->quoted, reason);
}

/* A bounded, printable copy of `len` bytes of a parameter for messages. */
static void quote_part(char out[48], const char *s, size_t len)
{
    size_t n = len < 40 ? len : 40;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (n < len) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

/* Decimal without sign or spaces, within [min, max]. */
static bool parse_decimal(uint64_t *out, const char *s, size_t len, uint64_t min, uint64_t max)
{
    uint64_t v = 0;
    if (len == 0 || len > 20)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* Octal permission bits; the owner must keep read and write, since the
 * recorder itself opens the file it created. */
static bool parse_mode(unsigned *out, const char *s, size_t len)
{
    unsigned v = 0;
    if (len == 0 || len > 4)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '7')
            return false;
        v = v * 8 + (unsigned)(s[i] - '0');
    }
    if (v > 0777 || (v & 0600) != 0600)
        return false;
    *out = v;
    return true;
}

static bool parse_sync(ib__sqlite_sync *out, const char *s, size_t len)
{
    static const char *const names[] = {"off", "normal", "full", "extra"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i]) == len && strncasecmp(names[i], s, len) == 0) {
            *out = (ib__sqlite_sync)i;
            return true;
        }
    }
    return false;
}

/* A duration: digits with an optional unit (ms, s, m, h, d; none = s),
 * at most ten years. */
static bool parse_duration(int64_t *out_ms, const char *s, size_t len)
{
    static const struct {
        const char *unit;
        uint64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    size_t digits = 0;
    while (digits < len && s[digits] >= '0' && s[digits] <= '9')
        digits++;
    uint64_t scale = 1000, v = 0;
    if (digits < len) {
        scale = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (strlen(units[i].unit) == len - digits &&
                memcmp(units[i].unit, s + digits, len - digits) == 0)
                scale = units[i].ms;
    }
    if (scale == 0 || !parse_decimal(&v, s, digits, 0, IB__KV_TTL_MAX_MS / scale))
        return false;
    *out_ms = (int64_t)(v * scale);
    return true;
}

/* A string parameter copied into `out` (the URL and credentials path of
 * kv:); false when it does not fit. */
static bool copy_value(char *out, size_t cap, const char *val, size_t vlen)
{
    if (vlen >= cap)
        return false;
    memcpy(out, val, vlen);
    out[vlen] = '\0';
    return true;
}

enum {
    P_CAPACITY,
    P_SYNCHRONOUS,
    P_BUSY_TIMEOUT,
    P_MODE,
    P_REPLICAS,
    P_TTL,
    P_MIN_TTL,
    P_MAX_BYTES,
    P_CREATE,
    P_URL,
    P_CREDS,
    P_DOMAIN,
    P_API_PREFIX,
    P_COUNT,
};

static const char *const param_names[P_COUNT] = {
    "capacity", "synchronous", "busy_timeout_ms", "mode",   "replicas",
    "ttl",      "min_ttl",     "max_bytes",       "create", "url",
    "creds",    "domain",      "api_prefix",
};

/* Whether parameter `which` belongs to the kind of `cfg`. */
static bool param_fits(const ib__recorder_config *cfg, int which)
{
    switch (cfg->kind) {
    case IB__RECORDER_MEMORY:
        return which == P_CAPACITY;
    case IB__RECORDER_SQLITE:
        return which >= P_SYNCHRONOUS && which <= P_MODE;
    case IB__RECORDER_KV:
        return which >= P_REPLICAS;
    }
    return false;
}

/* domain= or api_prefix=: the JetStream API prefix of the bucket. */
static ib_status apply_api_value(parse_ctx *pc, ib__recorder_config *cfg, int which,
                                 const char *val, size_t vlen, const char *qval)
{
    char text[IB_JS_API_PREFIX_MAX];
    if (!copy_value(text, sizeof(text), val, vlen))
        return fail(pc, "%s is longer than %zu bytes", param_names[which], sizeof(text) - 1);
    const char *why = which == P_DOMAIN ? ib_js_api_prefix(cfg->kv_api_prefix, text, NULL)
                                        : ib_js_api_prefix(cfg->kv_api_prefix, NULL, text);
    if (why != NULL)
        return fail(pc, "%s '%s' %s", param_names[which], qval, why);
    return IB_OK;
}

/* The kv: parameters' values. */
static ib_status apply_kv_value(parse_ctx *pc, ib__recorder_config *cfg, int which, const char *val,
                                size_t vlen, const char *qval)
{
    uint64_t v = 0;
    switch (which) {
    case P_REPLICAS:
        if (!parse_decimal(&v, val, vlen, 1, IB__KV_REPLICAS_MAX))
            return fail(pc, "replicas '%s' is not a number between 1 and %d", qval,
                        IB__KV_REPLICAS_MAX);
        cfg->kv_replicas = (int)v;
        return IB_OK;
    case P_TTL:
    case P_MIN_TTL:
        if (!parse_duration(which == P_TTL ? &cfg->kv_ttl_ms : &cfg->kv_min_ttl_ms, val, vlen))
            return fail(pc,
                        "%s '%s' is not a duration (digits with ms, s, m, h or d) of at "
                        "most ten years",
                        param_names[which], qval);
        return IB_OK;
    case P_MAX_BYTES:
        if (!parse_decimal(&v, val, vlen, 1, INT64_MAX))
            return fail(pc, "max_bytes '%s' is not a positive number", qval);
        cfg->kv_max_bytes = (int64_t)v;
        return IB_OK;
    case P_CREATE:
        if (vlen != 1 || (val[0] != '0' && val[0] != '1'))
            return fail(pc, "create '%s' is not 0 or 1", qval);
        cfg->kv_create = val[0] == '1';
        return IB_OK;
    case P_DOMAIN:
    case P_API_PREFIX:
        return apply_api_value(pc, cfg, which, val, vlen, qval);
    case P_URL:
        if (!copy_value(cfg->kv_url, sizeof(cfg->kv_url), val, vlen))
            return fail(pc, "url is longer than %zu bytes", sizeof(cfg->kv_url) - 1);
        return IB_OK;
    default:
        if (!copy_value(cfg->kv_creds, sizeof(cfg->kv_creds), val, vlen))
            return fail(pc, "creds path is longer than %zu bytes", sizeof(cfg->kv_creds) - 1);
        return IB_OK;
    }
}

/* The values of memory: and sqlite: parameters. */
static ib_status apply_local_value(parse_ctx *pc, ib__recorder_config *cfg, int which,
                                   const char *val, size_t vlen, const char *qval)
{
    uint64_t v = 0;
    switch (which) {
    case P_CAPACITY:
        if (!parse_decimal(&v, val, vlen, 1, IB__MEMORY_CAPACITY_MAX))
            return fail(pc, "capacity '%s' is not a number between 1 and %zu", qval,
                        (size_t)IB__MEMORY_CAPACITY_MAX);
        cfg->memory_capacity = (size_t)v;
        return IB_OK;
    case P_SYNCHRONOUS:
        if (!parse_sync(&cfg->synchronous, val, vlen))
            return fail(pc, "synchronous '%s' is not one of off, normal, full, extra", qval);
        return IB_OK;
    case P_BUSY_TIMEOUT:
        if (!parse_decimal(&v, val, vlen, 1, IB__BUSY_TIMEOUT_MAX_MS))
            return fail(pc, "busy_timeout_ms '%s' is not a number between 1 and %d", qval,
                        IB__BUSY_TIMEOUT_MAX_MS);
        cfg->busy_timeout_ms = (int)v;
        return IB_OK;
    default:
        if (!parse_mode(&cfg->file_mode, val, vlen))
            return fail(pc,
                        "mode '%s' is not octal permission bits (at most 0777) giving the owner "
                        "read and write",
                        qval);
        return IB_OK;
    }
}

/* One "name=value" parameter; `seen` has a bit per known name so a repeat
 * is refused rather than silently winning. */
static ib_status apply_param(parse_ctx *pc, ib__recorder_config *cfg, const char *p, size_t len,
                             unsigned *seen)
{
    char qname[48], qval[48];
    const char *eq = memchr(p, '=', len);
    if (len == 0)
        return fail(pc, "empty parameter");
    if (eq == NULL) {
        quote_part(qname, p, len);
        return fail(pc, "parameter '%s' has no value", qname);
    }
    size_t nlen = (size_t)(eq - p);
    const char *val = eq + 1;
    size_t vlen = len - nlen - 1;
    quote_part(qname, p, nlen);
    quote_part(qval, val, vlen);
    if (nlen == 0)
        return fail(pc, "parameter without a name");

    int which = -1;
    for (int i = 0; i < P_COUNT; i++)
        if (strlen(param_names[i]) == nlen && memcmp(param_names[i], p, nlen) == 0)
            which = i;
    if (which < 0 || !param_fits(cfg, which)) {
        const char *expected = cfg->kind == IB__RECORDER_MEMORY ? "memory: takes capacity"
                               : cfg->kind == IB__RECORDER_SQLITE
                                   ? "sqlite: takes synchronous, busy_timeout_ms, mode"
                                   : "kv: takes replicas, ttl, min_ttl, max_bytes, "
                                     "create, url, creds, domain, api_prefix";
        return fail(pc, "unknown parameter '%s' (%s)", qname, expected);
    }
    if (*seen & (1u << which))
        return fail(pc, "parameter '%s' given twice", qname);
    *seen |= 1u << which;
    if ((*seen & (1u << P_DOMAIN)) && (*seen & (1u << P_API_PREFIX)))
        return fail(pc, "domain and api_prefix exclude each other (a domain stands for the "
                        "prefix $JS.<domain>.API): give one");
    if (vlen == 0)
        return fail(pc, "parameter '%s' has an empty value", qname);
    if (cfg->kind == IB__RECORDER_KV)
        return apply_kv_value(pc, cfg, which, val, vlen, qval);
    return apply_local_value(pc, cfg, which, val, vlen, qval);
}

static ib_status parse_query(parse_ctx *pc, ib__recorder_config *cfg, const char *q)
{
    unsigned seen = 0;
    if (*q == '\0')
        return fail(pc, "'?' without parameters");
    for (;;) {
        const char *amp = strchr(q, '&');
        size_t len = amp != NULL ? (size_t)(amp - q) : strlen(q);
        ib_status st = apply_param(pc, cfg, q, len, &seen);
        if (st != IB_OK)
            return st;
        if (amp == NULL)
            break;
        q = amp + 1;
    }
    /* A url= of its own is another server: the caller's prefix, which
     * belongs to the caller's connection, does not follow it there. */
    if (cfg->kv_url[0] != '\0' && !(seen & ((1u << P_DOMAIN) | (1u << P_API_PREFIX))))
        snprintf(cfg->kv_api_prefix, sizeof(cfg->kv_api_prefix), "%s", IB_JS_API_DEFAULT);
    return IB_OK;
}

/* Options first; the URI's parameters then override them. */
static ib_status apply_options(parse_ctx *pc, ib__recorder_config *cfg,
                               const ib_recorder_options *options)
{
    ib_recorder_options o;
    memset(&o, 0, sizeof(o));
    if (options != NULL) {
        /* A caller built against a shorter struct leaves the new fields zero;
         * size 0 (zero-initialised, size forgotten) means this layout. */
        size_t n = options->size == 0 || options->size > sizeof(o) ? sizeof(o) : options->size;
        memcpy(&o, options, n);
    }
    cfg->memory_capacity = o.memory_capacity;
    cfg->busy_timeout_ms =
        o.sqlite_busy_timeout_ms == 0 ? DEFAULT_BUSY_TIMEOUT_MS : o.sqlite_busy_timeout_ms;
    cfg->synchronous = IB__SQLITE_SYNC_FULL;
    cfg->file_mode = o.sqlite_file_mode == 0 ? DEFAULT_FILE_MODE : o.sqlite_file_mode;
    cfg->allow_insecure = o.sqlite_allow_insecure;
    cfg->now_ms = o.now_ms != NULL ? o.now_ms : ib_clock_realtime_ms;
    /* Leases follow an injected clock, so tests can expire them. */
    cfg->lease_now_ms = o.now_ms != NULL ? o.now_ms : ib_clock_boottime_ms;
    cfg->nats_connection = o.nats_connection;
    cfg->kv_ttl_ms = -1;
    cfg->kv_create = o.kv_create;
    cfg->kv_min_ttl_ms = o.kv_min_ttl_ms > 0 ? o.kv_min_ttl_ms : 0;
    const char *why = ib_js_api_prefix(cfg->kv_api_prefix, NULL, o.kv_js_api_prefix);
    if (why != NULL)
        return fail(pc, "option kv_js_api_prefix %s", why);

    if (o.memory_capacity > IB__MEMORY_CAPACITY_MAX)
        return fail(pc, "option memory_capacity is above the limit of %zu",
                    (size_t)IB__MEMORY_CAPACITY_MAX);
    if (cfg->busy_timeout_ms < 0 || cfg->busy_timeout_ms > IB__BUSY_TIMEOUT_MAX_MS)
        return fail(pc, "option sqlite_busy_timeout_ms is not between 0 and %d",
                    IB__BUSY_TIMEOUT_MAX_MS);
    if (cfg->file_mode > 0777 || (cfg->file_mode & 0600) != 0600)
        return fail(
            pc, "option sqlite_file_mode is not permission bits giving the owner read and write");
    if (o.sqlite_synchronous != NULL &&
        !parse_sync(&cfg->synchronous, o.sqlite_synchronous, strlen(o.sqlite_synchronous)))
        return fail(pc, "option sqlite_synchronous is not one of off, normal, full, extra");
    return IB_OK;
}

static bool valid_bucket(const char *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

ib_status ib__recorder_config_parse(ib__recorder_config *cfg, const char *uri,
                                    const ib_recorder_options *options, ib_error *err)
{
    parse_ctx pc = {.uri = uri, .err = err};
    memset(cfg, 0, sizeof(*cfg));
    if (uri == NULL || uri[0] == '\0')
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder URI is empty (expected memory:, "
                            "sqlite:PATH or kv:BUCKET)");
    quote_uri(pc.quoted, uri);

    const char *colon = strchr(uri, ':');
    size_t slen = colon != NULL ? (size_t)(colon - uri) : 0;
    if (colon != NULL && slen == 6 && strncasecmp(uri, "memory", 6) == 0)
        cfg->kind = IB__RECORDER_MEMORY;
    else if (colon != NULL && slen == 6 && strncasecmp(uri, "sqlite", 6) == 0)
        cfg->kind = IB__RECORDER_SQLITE;
    else if (colon != NULL && slen == 2 && strncasecmp(uri, "kv", 2) == 0)
        cfg->kind = IB__RECORDER_KV;
    else if (colon == NULL)
        return fail(&pc, "no scheme (expected memory:, sqlite:PATH or kv:BUCKET)");
    else {
        char qs[48];
        quote_part(qs, uri, slen);
        return fail(&pc, "unknown scheme '%s:' (expected memory:, sqlite:PATH or kv:BUCKET)", qs);
    }

    ib_status st = apply_options(&pc, cfg, options);
    if (st != IB_OK)
        return st;

    const char *body = colon + 1;
    /* sqlite::memory: is a name, not a path, and may carry parameters. */
    const char *query = strchr(body, '?');
    size_t blen = query != NULL ? (size_t)(query - body) : strlen(body);

    switch (cfg->kind) {
    case IB__RECORDER_MEMORY:
        if (blen != 0)
            return fail(&pc, "memory: takes no path, only ?capacity=N");
        break;
    case IB__RECORDER_SQLITE:
        if (blen == 0)
            return fail(&pc, "empty path (e.g. sqlite:processed.db or sqlite::memory:)");
        if (blen >= sizeof(cfg->path))
            return fail(&pc, "path is longer than %d bytes", IB__RECORDER_PATH_MAX - 1);
        memcpy(cfg->path, body, blen);
        cfg->path[blen] = '\0';
        break;
    case IB__RECORDER_KV:
        if (blen == 0)
            return fail(&pc, "empty bucket name");
        if (blen > IB__KV_BUCKET_MAX)
            return fail(&pc, "bucket name is longer than %d bytes", IB__KV_BUCKET_MAX);
        if (!valid_bucket(body, blen))
            return fail(&pc, "bucket name may hold only letters, digits, '-' and '_'");
        memcpy(cfg->path, body, blen);
        cfg->path[blen] = '\0';
        break;
    }
    if (query != NULL)
        return parse_query(&pc, cfg, query + 1);
    return IB_OK;
}

/* sqlite_must_exist, read only from a struct long enough to hold it. */
static bool options_must_exist(const ib_recorder_options *o)
{
    return (o->size == 0 || o->size >= offsetof(ib_recorder_options, sqlite_must_exist) + 1) &&
           o->sqlite_must_exist;
}

/* What a restart cannot fix is a configuration error: a marker file in a
 * directory that does not exist, and with `must_exist` a missing file
 * (a tool that only reads must not leave an empty file behind a typo). */
static ib_status check_sqlite_path(const ib__recorder_config *cfg, const char *full,
                                   bool must_exist, ib_error *err)
{
    char uri[IB_REDACT_MAX];
    ib_redact_url(uri, sizeof(uri), full);
    struct stat st;
    char dir[IB__RECORDER_PATH_MAX];
    if (strcmp(cfg->path, ":memory:") == 0)
        return IB_OK;
    if (lstat(cfg->path, &st) == 0 || errno != ENOENT)
        return IB_OK; /* the sqlite recorder checks what is there */
    snprintf(dir, sizeof(dir), "%s", cfg->path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder %.*s: directory %s does not exist (create it, or name a "
                            "file in an existing directory)",
                            QUOTE_MAX, uri, dir);
    if (must_exist)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder %.*s: no such file (check the path; only ibus run creates "
                            "a marker file)",
                            QUOTE_MAX, uri);
    return IB_OK;
}

ib_status ib_recorder_open(ib_recorder **out, const char *uri, const ib_recorder_options *options,
                           ib_error *err)
{
    ib__recorder_config cfg;
    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: output parameter is NULL");
    *out = NULL;
    ib_status st = ib__recorder_config_parse(&cfg, uri, options, err);
    if (st != IB_OK)
        return st;
    switch (cfg.kind) {
    case IB__RECORDER_MEMORY:
        return ib__memory_open(out, &cfg, err);
    case IB__RECORDER_SQLITE:
        st = check_sqlite_path(&cfg, uri, options != NULL && options_must_exist(options), err);
        return st == IB_OK ? ib__sqlite_open(out, &cfg, err) : st;
    case IB__RECORDER_KV:
        break;
    }
    return ib__kv_open(out, &cfg, err);
}

bool ib__recorder_uri_needs_connection(const char *uri)
{
    ib__recorder_config cfg;
    if (ib__recorder_config_parse(&cfg, uri, NULL, NULL) != IB_OK)
        return false;
    return cfg.kind == IB__RECORDER_KV && cfg.kv_url[0] == '\0';
}

bool ib__recorder_uri_sqlite_path(const char *uri, char *path, size_t cap)
{
    ib__recorder_config cfg;
    if (ib__recorder_config_parse(&cfg, uri, NULL, NULL) != IB_OK ||
        cfg.kind != IB__RECORDER_SQLITE || strcmp(cfg.path, ":memory:") == 0)
        return false;
    snprintf(path, cap, "%s", cfg.path);
    return true;
}
