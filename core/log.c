/* SPDX-License-Identifier: Apache-2.0 */
/* Structured logger: builds each record in a buffer, then writes it with one
 * fwrite+fflush while holding the stream's stdio lock, so records from many
 * threads (and other stdio users of the same stream) never interleave. */
#include "log.h"

#include "trace.h"
#include "utf8.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* One record is built in a stack buffer and moves to the heap only when it
 * outgrows it. Values longer than IB_LOG_VALUE_MAX input bytes are cut (at a
 * character boundary) so a runaway string cannot make a multi-megabyte line. */
#define IB_LOG_STACK 1024
#define IB_LOG_VALUE_MAX 8192

typedef struct ib_linebuf {
    char *p;
    size_t len;
    size_t cap;
    int oom; /* an allocation failed: the record is dropped, never half-written */
    char stack[IB_LOG_STACK];
} ib_linebuf;

/* Configuration is read on every record, possibly while the host
 * reconfigures: plain atomics keep each field consistent without a lock. */
static _Atomic int g_format = IB_LOG_FORMAT_AUTO;
static _Atomic int g_min_sev = IB_SEV_INFO;
static FILE *_Atomic g_stream = NULL;

static void lb_init(ib_linebuf *b)
{
    b->p = b->stack;
    b->len = 0;
    b->cap = sizeof(b->stack);
    b->oom = 0;
}

static void lb_release(ib_linebuf *b)
{
    if (b->p != b->stack)
        free(b->p);
}

/* Makes room for `n` more bytes plus a terminating NUL. */
static int lb_reserve(ib_linebuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap * 2;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = malloc(cap);
    if (p == NULL) {
        b->oom = 1;
        return -1;
    }
    memcpy(p, b->p, b->len);
    lb_release(b);
    b->p = p;
    b->cap = cap;
    return 0;
}

static void lb_put(ib_linebuf *b, const char *s, size_t n)
{
    if (lb_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void lb_puts(ib_linebuf *b, const char *s)
{
    lb_put(b, s, strlen(s));
}

static void lb_putc(ib_linebuf *b, char c)
{
    lb_put(b, &c, 1);
}

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 if the bytes
 * there are not one (the strict rules of RFC 3629, shared with the event
 * checks). */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    return ib__utf8_decode(&cp, s, n);
}

/* How a value is escaped. JSON: control characters become escapes and each
 * byte of invalid UTF-8 becomes U+FFFD, so the line is always valid JSON
 * whatever a plugin or a producer put in a field. Text records are read by
 * people on a terminal: control characters and invalid UTF-8 are shown as
 * \xNN so nothing can forge a line or move the cursor; inside quotes, quotes
 * and backslashes are escaped too. */
typedef enum escape_style {
    ESCAPE_JSON,
    ESCAPE_TEXT,
    ESCAPE_TEXT_QUOTED,
} escape_style;

static const char hex_digits[] = "0123456789abcdef";

/* True if the ASCII byte `c` cannot be copied as it is. */
static int ascii_needs_escape(escape_style style, unsigned char c)
{
    if (c < 0x20 || c == 0x7f)
        return 1;
    return style != ESCAPE_TEXT && (c == '"' || c == '\\');
}

/* Writes a byte shown as \xNN (text) or \u00NN (JSON). */
static void put_hex_escape(ib_linebuf *b, escape_style style, unsigned char c)
{
    if (style == ESCAPE_JSON) {
        char e[6] = {'\\', 'u', '0', '0', hex_digits[c >> 4], hex_digits[c & 0xf]};
        lb_put(b, e, 6);
    } else {
        char e[4] = {'\\', 'x', hex_digits[c >> 4], hex_digits[c & 0xf]};
        lb_put(b, e, 4);
    }
}

/* Writes the escape of an ASCII byte for which ascii_needs_escape holds. */
static void put_ascii_escape(ib_linebuf *b, escape_style style, unsigned char c)
{
    if (c == '"' || c == '\\') {
        char e[2] = {'\\', (char)c};
        lb_put(b, e, 2);
    } else if (c == '\n') {
        lb_puts(b, "\\n");
    } else if (c == '\t') {
        lb_puts(b, "\\t");
    } else if (style == ESCAPE_JSON && c == '\r') {
        lb_puts(b, "\\r");
    } else if (style == ESCAPE_JSON && c == '\b') {
        lb_puts(b, "\\b");
    } else if (style == ESCAPE_JSON && c == '\f') {
        lb_puts(b, "\\f");
    } else {
        put_hex_escape(b, style, c);
    }
}

/* Appends `s` escaped in `style`, cut after IB_LOG_VALUE_MAX bytes. */
static void put_escaped(ib_linebuf *b, const char *s, escape_style style)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    int cut = 0;
    if (n > IB_LOG_VALUE_MAX) {
        n = IB_LOG_VALUE_MAX;
        cut = 1;
    }
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c < 0x80) {
            /* copy the run of plain ASCII in one go */
            size_t j = i;
            while (j < n && u[j] < 0x80 && !ascii_needs_escape(style, u[j]))
                j++;
            if (j > i) {
                lb_put(b, s + i, j - i);
                i = j;
            } else {
                put_ascii_escape(b, style, c);
                i++;
            }
            continue;
        }
        size_t len = utf8_seq_len(u + i, n - i);
        if (len != 0) {
            lb_put(b, s + i, len);
            i += len;
            continue;
        }
        /* a sequence cut by the length bound is dropped, not replaced */
        if (cut && n - i < 4 && utf8_seq_len(u + i, strlen(s + i)) != 0)
            break;
        if (style == ESCAPE_JSON)
            lb_puts(b, "\\ufffd");
        else
            put_hex_escape(b, style, c);
        i++;
    }
    if (cut)
        lb_puts(b, "...(truncated)");
}

/* Appends `s` as the inside of a JSON string. */
static void json_escape(ib_linebuf *b, const char *s)
{
    put_escaped(b, s, ESCAPE_JSON);
}

/* Appends `s` for a text record. `quote` wraps the value in quotes when it
 * holds spaces, quotes or '=' so key=value pairs stay unambiguous. */
static void text_escape(ib_linebuf *b, const char *s, int quote)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strnlen(s, IB_LOG_VALUE_MAX);
    int need_quotes = 0;
    if (quote) {
        need_quotes = (n == 0);
        for (size_t i = 0; i < n && !need_quotes; i++)
            need_quotes = (u[i] <= 0x20 || u[i] == '"' || u[i] == '=' || u[i] == 0x7f ||
                           u[i] >= 0x80 || u[i] == '\\');
    }
    if (need_quotes)
        lb_putc(b, '"');
    put_escaped(b, s, need_quotes ? ESCAPE_TEXT_QUOTED : ESCAPE_TEXT);
    if (need_quotes)
        lb_putc(b, '"');
}

/* Plugins may pass any int through the host API; clamp to a known level. */
static ib_log_sev sev_clamp(ib_log_sev sev)
{
    if ((int)sev < IB_SEV_DEBUG)
        return IB_SEV_DEBUG;
    if ((int)sev > IB_SEV_ERROR)
        return IB_SEV_ERROR;
    return sev;
}

/* A level's name in JSON records ("warn") and in text records ("WARN"). */
static const char *const sev_names[][2] = {
    [IB_SEV_DEBUG] = {"debug", "DEBUG"},
    [IB_SEV_INFO] = {"info", "INFO"},
    [IB_SEV_WARN] = {"warn", "WARN"},
    [IB_SEV_ERROR] = {"error", "ERROR"},
};

static const char *sev_name(ib_log_sev sev, int upper)
{
    return sev_names[sev_clamp(sev)][upper];
}

/* RFC 3339 UTC with milliseconds: 2026-01-01T00:00:00.000Z */
static void put_timestamp(ib_linebuf *b)
{
    struct timespec ts;
    struct tm tm;
    char out[40];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, sizeof(out) - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
    lb_puts(b, out);
}

static FILE *current_stream(void)
{
    FILE *f = atomic_load_explicit(&g_stream, memory_order_acquire);
    return f != NULL ? f : stderr;
}

static ib_log_format resolve_format(ib_log_format fmt, FILE *f)
{
    if (fmt == IB_LOG_FORMAT_JSON || fmt == IB_LOG_FORMAT_TEXT)
        return fmt;
    int fd = fileno(f);
    return (fd >= 0 && isatty(fd)) ? IB_LOG_FORMAT_TEXT : IB_LOG_FORMAT_JSON;
}

/* The three fields every record starts with use these names; a caller's key
 * that collides is written with a leading underscore so a JSON object never
 * holds one key twice. */
static int reserved_key(const char *key)
{
    return strcmp(key, "ts") == 0 || strcmp(key, "level") == 0 || strcmp(key, "msg") == 0;
}

/* Room for any number this file writes: "%.17g" of a double takes at most
 * 24 bytes, a 64-bit integer 20 plus a sign. */
#define IB_LOG_NUMBER_MAX 40

/* Rewrites the decimal point of a number printf just wrote as '.': a
 * plugin that calls setlocale() could otherwise make it a comma (or
 * several bytes), and the JSON invalid. Digits, signs and the exponent are
 * the same in every locale; anything else is the decimal point. */
static void decimal_point_to_dot(char *s)
{
    char *w = s;
    bool dot = false;
    for (const char *r = s; *r != '\0'; r++) {
        if ((*r >= '0' && *r <= '9') || *r == '-' || *r == '+' || *r == 'e' || *r == 'E') {
            *w++ = *r;
        } else if (!dot) {
            *w++ = '.';
            dot = true;
        }
    }
    *w = '\0';
}

/* A finite double with the fewest digits that read back as the same value,
 * and always with a fraction or an exponent: a pipeline that types a field
 * from its first value must see 3.0 as a real, or a later 0.25 would not
 * fit the field. */
static const char *double_repr(char out[IB_LOG_NUMBER_MAX], double d)
{
    snprintf(out, IB_LOG_NUMBER_MAX, "%.15g", d);
    if (strtod(out, NULL) != d)
        snprintf(out, IB_LOG_NUMBER_MAX, "%.17g", d);
    decimal_point_to_dot(out);
    if (strpbrk(out, ".e") == NULL)
        strcat(out, ".0");
    return out;
}

/* The bare (unquoted) form of a number or boolean in `fmt`, or NULL for a
 * value JSON cannot hold (NaN, infinities) or an unknown kind: null. */
static const char *scalar_repr(char out[IB_LOG_NUMBER_MAX], const ib_log_field *f,
                               ib_log_format fmt)
{
    switch (f->kind) {
    case IB_LOG_KIND_I64:
        snprintf(out, IB_LOG_NUMBER_MAX, "%" PRId64, f->v.i);
        return out;
    case IB_LOG_KIND_U64:
        snprintf(out, IB_LOG_NUMBER_MAX, "%" PRIu64, f->v.u);
        return out;
    case IB_LOG_KIND_BOOL:
        return f->v.b ? "true" : "false";
    case IB_LOG_KIND_F64:
        if (isfinite(f->v.f))
            return double_repr(out, f->v.f);
        if (fmt == IB_LOG_FORMAT_JSON)
            return NULL;
        return isnan(f->v.f) ? "NaN" : f->v.f > 0 ? "+Inf" : "-Inf";
    default:
        return NULL;
    }
}

/* Writes a string value, or null ("-" in text) for NULL. */
static void put_string_value(ib_linebuf *b, ib_log_format fmt, const char *value)
{
    if (fmt == IB_LOG_FORMAT_JSON) {
        if (value == NULL) {
            lb_puts(b, "null");
        } else {
            lb_putc(b, '"');
            json_escape(b, value);
            lb_putc(b, '"');
        }
    } else if (value == NULL) {
        lb_putc(b, '-');
    } else {
        text_escape(b, value, 1);
    }
}

static void put_field(ib_linebuf *b, ib_log_format fmt, const ib_log_field *f)
{
    const char *key = f->key != NULL ? f->key : "";
    if (fmt == IB_LOG_FORMAT_JSON) {
        lb_puts(b, reserved_key(key) ? ",\"_" : ",\"");
        json_escape(b, key);
        lb_puts(b, "\":");
    } else {
        lb_putc(b, ' ');
        if (reserved_key(key))
            lb_putc(b, '_');
        text_escape(b, key, 1);
        lb_putc(b, '=');
    }
    if (f->kind == IB_LOG_KIND_STR) {
        put_string_value(b, fmt, f->v.s);
        return;
    }
    /* numbers need no escaping: digits, signs, '.', 'e', letters of NaN/Inf */
    char num[IB_LOG_NUMBER_MAX];
    const char *repr = scalar_repr(num, f, fmt);
    lb_puts(b, repr != NULL ? repr : fmt == IB_LOG_FORMAT_JSON ? "null" : "-");
}

static void put_head(ib_linebuf *b, ib_log_format fmt, ib_log_sev sev, const char *msg)
{
    if (fmt == IB_LOG_FORMAT_JSON) {
        lb_puts(b, "{\"ts\":\"");
        put_timestamp(b);
        lb_puts(b, "\",\"level\":\"");
        lb_puts(b, sev_name(sev, 0));
        lb_puts(b, "\",\"msg\":\"");
        json_escape(b, msg != NULL ? msg : "");
        lb_putc(b, '"');
    } else {
        put_timestamp(b);
        lb_putc(b, ' ');
        lb_puts(b, sev_name(sev, 1));
        lb_putc(b, ' ');
        text_escape(b, msg != NULL ? msg : "", 0);
    }
}

static void put_tail_and_write(ib_linebuf *b, ib_log_format fmt, FILE *f)
{
    if (fmt == IB_LOG_FORMAT_JSON)
        lb_putc(b, '}');
    lb_putc(b, '\n');
    if (b->oom)
        return;
    flockfile(f);
    fwrite(b->p, 1, b->len, f);
    fflush(f);
    funlockfile(f);
}

void ib_log_configure(ib_log_format format, ib_log_sev min_sev, FILE *stream)
{
    if (format != IB_LOG_FORMAT_JSON && format != IB_LOG_FORMAT_TEXT)
        format = IB_LOG_FORMAT_AUTO;
    FILE *f = stream != NULL ? stream : stderr;
    /* resolve AUTO once here instead of asking isatty() on every record */
    atomic_store_explicit(&g_format, (int)resolve_format(format, f), memory_order_relaxed);
    atomic_store_explicit(&g_min_sev, (int)sev_clamp(min_sev), memory_order_relaxed);
    atomic_store_explicit(&g_stream, stream, memory_order_release);
}

/* A name and the enum value it stands for, for the two parsers below. */
typedef struct log_name {
    const char *name;
    int value;
} log_name;

static int lookup_name(int *out, const log_name *names, size_t n, const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(name, names[i].name) == 0) {
            *out = names[i].value;
            return 0;
        }
    }
    return -1;
}

int ib_log_format_parse(ib_log_format *out, const char *name)
{
    static const log_name names[] = {
        {"json", IB_LOG_FORMAT_JSON},
        {"text", IB_LOG_FORMAT_TEXT},
        {"auto", IB_LOG_FORMAT_AUTO},
    };
    int v;
    if (lookup_name(&v, names, sizeof(names) / sizeof(names[0]), name) != 0)
        return -1;
    if (out != NULL)
        *out = (ib_log_format)v;
    return 0;
}

int ib_log_sev_parse(ib_log_sev *out, const char *name)
{
    static const log_name names[] = {
        {"debug", IB_SEV_DEBUG},  {"info", IB_SEV_INFO},   {"warn", IB_SEV_WARN},
        {"warning", IB_SEV_WARN}, {"error", IB_SEV_ERROR},
    };
    int v;
    if (lookup_name(&v, names, sizeof(names) / sizeof(names[0]), name) != 0)
        return -1;
    if (out != NULL)
        *out = (ib_log_sev)v;
    return 0;
}

int ib_log_enabled(ib_log_sev sev)
{
    return (int)sev_clamp(sev) >= atomic_load_explicit(&g_min_sev, memory_order_relaxed);
}

/* A record being built, and the stream and format it will be written
 * with (read once at the start, so a concurrent reconfiguration cannot
 * split it). */
typedef struct log_record {
    ib_linebuf b;
    FILE *f;
    ib_log_format fmt;
} log_record;

/* Starts a record of an enabled `sev` in `r`: its head. */
static void record_start(log_record *r, ib_log_sev sev, const char *msg)
{
    r->f = current_stream();
    r->fmt =
        resolve_format((ib_log_format)atomic_load_explicit(&g_format, memory_order_relaxed), r->f);
    lb_init(&r->b);
    put_head(&r->b, r->fmt, sev_clamp(sev), msg);
}

/* Closes the record, writes it in one piece and releases its buffer. A
 * record written while the thread works for a traced event names the
 * trace and the span (trace.h). */
static void record_finish(log_record *r)
{
    const ib_trace *t = ib_trace_current();
    if (t != NULL) {
        ib_log_field ids[] = {IB_LOG_STR("trace_id", t->trace_id),
                              IB_LOG_STR("span_id", t->span_id)};
        put_field(&r->b, r->fmt, &ids[0]);
        put_field(&r->b, r->fmt, &ids[1]);
    }
    put_tail_and_write(&r->b, r->fmt, r->f);
    lb_release(&r->b);
}

void ib_log_kv(ib_log_sev sev, const char *msg, ...)
{
    if (!ib_log_enabled(sev))
        return;
    log_record r;
    record_start(&r, sev, msg);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (key == NULL)
            break;
        ib_log_field field = IB_LOG_STR(key, va_arg(ap, const char *));
        put_field(&r.b, r.fmt, &field);
    }
    va_end(ap);
    record_finish(&r);
}

void ib_log_fields(ib_log_sev sev, const char *msg, const ib_log_field *fields, size_t n)
{
    if (!ib_log_enabled(sev))
        return;
    log_record r;
    record_start(&r, sev, msg);
    for (size_t i = 0; fields != NULL && i < n; i++)
        put_field(&r.b, r.fmt, &fields[i]);
    record_finish(&r);
}

void ib_logv(ib_log_sev sev, const char *component, const char *fmtstr, va_list ap)
{
    if (!ib_log_enabled(sev))
        return;

    /* format the message first: into a small buffer, or exactly sized on the heap */
    char small[256];
    char *heap = NULL;
    const char *msg = small;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof(small), fmtstr != NULL ? fmtstr : "", ap2);
    va_end(ap2);
    if (n < 0) {
        msg = "(unformattable log message)";
    } else if ((size_t)n >= sizeof(small)) {
        heap = malloc((size_t)n + 1);
        if (heap == NULL)
            return;
        vsnprintf(heap, (size_t)n + 1, fmtstr, ap);
        msg = heap;
    }
    ib_log_field field = IB_LOG_STR("component", component);
    ib_log_fields(sev, msg, &field, component != NULL ? 1 : 0);
    free(heap);
}

void ib_logf(ib_log_sev sev, const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ib_logv(sev, component, fmt, ap);
    va_end(ap);
}
