/* SPDX-License-Identifier: Apache-2.0 */
/* The structured logger: every JSON line must parse back (strictly) to what
 * was logged, with numbers as JSON numbers of the right kind, text lines
 * must stay one line with no raw control bytes, and records from many
 * threads must never interleave. */
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ib_test.h"
#include "json_check.h"
#include "log.h"
#include "trace.h"

typedef struct capture {
    FILE *f;
    char *buf;
    size_t size;
} capture;

static void capture_open(capture *c, ib_log_format fmt, ib_log_sev min)
{
    c->buf = NULL;
    c->size = 0;
    c->f = open_memstream(&c->buf, &c->size);
    assert_non_null(c->f);
    ib_log_configure(fmt, min, c->f);
}

/* Returns the captured text (valid until capture_close). */
static const char *capture_text(capture *c)
{
    fflush(c->f);
    return c->buf;
}

static void capture_close(capture *c)
{
    ib_log_configure(IB_LOG_FORMAT_AUTO, IB_SEV_INFO, NULL);
    fclose(c->f);
    free(c->buf);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s != '\0'; s++)
        n += *s == '\n';
    return n;
}

/* Parses the single line in `text` (which must end in exactly one '\n'). */
static void parse_one(json_flat *o, const char *text)
{
    size_t len = strlen(text);
    assert_true(len > 0);
    assert_int_equal(text[len - 1], '\n');
    assert_int_equal(count_lines(text), 1);
    char why[128];
    int rc = json_check_object(o, text, len - 1, why, sizeof(why));
    if (rc != 0)
        print_error("bad JSON (%s): %s", why, text);
    assert_int_equal(rc, 0);
}

static void assert_field(const json_flat *o, const char *key, const char *want)
{
    const json_field *f = json_get(o, key);
    assert_non_null(f);
    if (want == NULL) {
        assert_null(f->value);
    } else {
        assert_non_null(f->value);
        assert_string_equal(f->value, want);
    }
}

static const struct {
    const char *in;
    const char *want; /* what a JSON reader must decode */
} awkward[] = {
    {"plain", "plain"},
    {"", ""},
    {"quote\" back\\slash /", "quote\" back\\slash /"},
    {"nl\ncr\rtab\tbs\bff\f", "nl\ncr\rtab\tbs\bff\f"},
    {"\x01\x1f\x7f\x1b[31m", "\x01\x1f\x7f\x1b[31m"},
    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"bad\xff", "bad\xef\xbf\xbd"},                                           /* stray byte */
    {"\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},                                 /* overlong NUL */
    {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},                 /* surrogate */
    {"end\xe2\x82", "end\xef\xbf\xbd\xef\xbf\xbd"},                           /* truncated */
    {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
    {"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
    {"\x80\xbf", "\xef\xbf\xbd\xef\xbf\xbd"},         /* lone continuations */
    {"\"}\n{\"forged\":\"1", "\"}\n{\"forged\":\"1"}, /* injection attempt */
};

static void json_escapes_awkward_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(awkward) / sizeof(awkward[0]); i++) {
        capture c;
        capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
        ib_log_kv(IB_SEV_WARN, awkward[i].in, "value", awkward[i].in, awkward[i].in, "as-key",
                  "nothing", NULL, NULL);
        json_flat o;
        parse_one(&o, capture_text(&c));
        assert_field(&o, "level", "warn");
        assert_field(&o, "msg", awkward[i].want);
        assert_field(&o, "value", awkward[i].want);
        assert_field(&o, "nothing", NULL);
        assert_field(&o, awkward[i].want, "as-key");
        json_flat_free(&o);
        capture_close(&c);
    }
}

static void json_long_value_is_cut_at_a_character(void **state)
{
    (void)state;
    /* 8191 'a' then a 3-byte character straddling the 8192-byte bound */
    size_t n = 8191;
    char *big = malloc(n + 4 + 100000);
    assert_non_null(big);
    memset(big, 'a', n);
    memcpy(big + n, "\xe2\x82\xac", 3);
    memset(big + n + 3, 'b', 100000);
    big[n + 3 + 100000] = '\0';

    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log_kv(IB_SEV_INFO, "big", "v", big, NULL);
    json_flat o;
    parse_one(&o, capture_text(&c));
    const json_field *f = json_get(&o, "v");
    assert_non_null(f);
    assert_non_null(f->value);
    size_t len = strlen(f->value);
    assert_int_equal(len, n + strlen("...(truncated)"));
    assert_int_equal(f->value[0], 'a');
    assert_int_equal(f->value[n - 1], 'a');
    assert_string_equal(f->value + n, "...(truncated)");
    json_flat_free(&o);
    capture_close(&c);
    free(big);
}

/* 2026-01-01T00:00:00.000Z, close to now (a sanity bound, not a speed test) */
static void assert_rfc3339_ms(const char *ts)
{
    assert_int_equal(strlen(ts), 24);
    int y, mo, d, h, mi, s, ms;
    char z;
    assert_int_equal(sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &s, &ms, &z),
                     8);
    assert_int_equal(z, 'Z');
    assert_int_equal(ts[4], '-');
    assert_int_equal(ts[10], 'T');
    assert_int_equal(ts[19], '.');
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    time_t t = timegm(&tm);
    time_t now = time(NULL);
    assert_true(t <= now + 1 && t >= now - 600);
}

static void timestamp_is_rfc3339_utc_with_ms(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log_kv(IB_SEV_ERROR, "x", NULL);
    json_flat o;
    parse_one(&o, capture_text(&c));
    const json_field *ts = json_get(&o, "ts");
    assert_non_null(ts);
    assert_rfc3339_ms(ts->value);
    assert_field(&o, "level", "error");
    /* ts, level and msg come first, in that order */
    assert_string_equal(o.fields[0].key, "ts");
    assert_string_equal(o.fields[1].key, "level");
    assert_string_equal(o.fields[2].key, "msg");
    json_flat_free(&o);
    capture_close(&c);
}

static void reserved_keys_are_never_duplicated(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log_kv(IB_SEV_INFO, "real", "msg", "x", "level", "y", "ts", "z", NULL);
    json_flat o;
    parse_one(&o, capture_text(&c)); /* the checker rejects duplicate keys */
    assert_field(&o, "msg", "real");
    assert_field(&o, "_msg", "x");
    assert_field(&o, "_level", "y");
    assert_field(&o, "_ts", "z");
    json_flat_free(&o);
    capture_close(&c);
}

static void levels_below_the_minimum_are_dropped(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_WARN);
    assert_false(ib_log_enabled(IB_SEV_DEBUG));
    assert_false(ib_log_enabled(IB_SEV_INFO));
    assert_true(ib_log_enabled(IB_SEV_WARN));
    assert_true(ib_log_enabled(IB_SEV_ERROR));
    ib_log_kv(IB_SEV_DEBUG, "d", NULL);
    ib_log_kv(IB_SEV_INFO, "i", NULL);
    ib_logf(IB_SEV_INFO, NULL, "f%d", 1);
    ib_log_kv(IB_SEV_WARN, "w", NULL);
    ib_log_kv((ib_log_sev)99, "clamped", NULL); /* a plugin's bogus level */
    const char *text = capture_text(&c);
    assert_int_equal(count_lines(text), 2);
    assert_null(strstr(text, "\"msg\":\"d\""));
    assert_null(strstr(text, "\"msg\":\"i\""));
    assert_non_null(strstr(text, "\"level\":\"warn\",\"msg\":\"w\""));
    assert_non_null(strstr(text, "\"level\":\"error\",\"msg\":\"clamped\""));
    capture_close(&c);
}

static void logf_formats_message_and_component(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_logf(IB_SEV_INFO, "loader", "plugin %s: %d handlers", "x.so", 3);
    json_flat o;
    parse_one(&o, capture_text(&c));
    assert_field(&o, "msg", "plugin x.so: 3 handlers");
    assert_field(&o, "component", "loader");
    json_flat_free(&o);
    capture_close(&c);

    /* longer than the stack buffer: formatted on the heap */
    char want[1001];
    memset(want, 'z', 1000);
    want[1000] = '\0';
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_logf(IB_SEV_DEBUG, NULL, "%s", want);
    parse_one(&o, capture_text(&c));
    assert_field(&o, "msg", want);
    assert_field(&o, "level", "debug");
    assert_null(json_get(&o, "component"));
    json_flat_free(&o);
    capture_close(&c);
}

static void text_format_is_one_escaped_line(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_TEXT, IB_SEV_DEBUG);
    ib_log_kv(IB_SEV_WARN, "dead-lettered\n", "consumer", "c1", "reason", "has space", "nl", "a\nb",
              "esc", "\x1b[2J", "bad", "\xff", "eq", "a=b", "none", NULL, "empty", "", NULL);
    const char *text = capture_text(&c);
    assert_int_equal(count_lines(text), 1);
    for (const char *p = text; *p != '\0'; p++)
        assert_true((unsigned char)*p >= 0x20 || *p == '\n');
    char ts[25];
    memcpy(ts, text, 24);
    ts[24] = '\0';
    assert_rfc3339_ms(ts);
    assert_string_equal(text + 24, " WARN dead-lettered\\n consumer=c1 reason=\"has space\" "
                                   "nl=\"a\\nb\" esc=\"\\x1b[2J\" bad=\"\\xff\" eq=\"a=b\" "
                                   "none=- empty=\"\"\n");
    capture_close(&c);
}

static void auto_format_follows_the_terminal(void **state)
{
    (void)state;
    /* not a terminal: JSON */
    capture c;
    capture_open(&c, IB_LOG_FORMAT_AUTO, IB_SEV_DEBUG);
    ib_log_kv(IB_SEV_INFO, "auto", NULL);
    json_flat o;
    parse_one(&o, capture_text(&c));
    json_flat_free(&o);
    capture_close(&c);

    /* a pseudo-terminal: text */
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    assert_true(slave >= 0);
    FILE *tty = fdopen(slave, "w");
    assert_non_null(tty);
    ib_log_configure(IB_LOG_FORMAT_AUTO, IB_SEV_DEBUG, tty);
    ib_log_kv(IB_SEV_INFO, "on-a-tty", NULL);
    ib_log_configure(IB_LOG_FORMAT_AUTO, IB_SEV_INFO, NULL);
    char buf[256] = {0};
    ssize_t n = read(master, buf, sizeof(buf) - 1);
    assert_true(n > 24);
    assert_int_equal(buf[0] == '{', 0);
    assert_non_null(strstr(buf, " INFO on-a-tty"));
    fclose(tty);
    close(master);
}

#define LOG_THREADS 8

typedef struct log_arg {
    int id;
    int records;
} log_arg;

static void *log_worker(void *p)
{
    log_arg *a = p;
    char filler[301];
    memset(filler, 'a' + a->id, 300);
    filler[300] = '\0';
    for (int i = 0; i < a->records; i++) {
        char seq[32], tid[8];
        snprintf(seq, sizeof(seq), "%d", i);
        snprintf(tid, sizeof(tid), "%d", a->id);
        ib_log_kv(IB_SEV_INFO, "concurrent", "thread", tid, "seq", seq, "filler", filler, NULL);
    }
    return NULL;
}

static void concurrent_records_never_interleave(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    ib_log_configure(IB_LOG_FORMAT_JSON, IB_SEV_DEBUG, f);
    int records = getenv("IB_UNDER_VALGRIND") != NULL ? 40 : 500;
    pthread_t t[LOG_THREADS];
    log_arg args[LOG_THREADS];
    for (int i = 0; i < LOG_THREADS; i++) {
        args[i].id = i;
        args[i].records = records;
        assert_int_equal(pthread_create(&t[i], NULL, log_worker, &args[i]), 0);
    }
    for (int i = 0; i < LOG_THREADS; i++)
        pthread_join(t[i], NULL);
    ib_log_configure(IB_LOG_FORMAT_AUTO, IB_SEV_INFO, NULL);

    rewind(f);
    int next_seq[LOG_THREADS] = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int total = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        assert_int_equal(line[n - 1], '\n');
        json_flat o;
        char why[128];
        int rc = json_check_object(&o, line, (size_t)n - 1, why, sizeof(why));
        if (rc != 0)
            print_error("interleaved or bad line (%s): %.80s\n", why, line);
        assert_int_equal(rc, 0);
        int tid = atoi(json_get(&o, "thread")->value);
        int seq = atoi(json_get(&o, "seq")->value);
        assert_true(tid >= 0 && tid < LOG_THREADS);
        /* one thread's records keep their order */
        assert_int_equal(seq, next_seq[tid]);
        next_seq[tid]++;
        const char *filler = json_get(&o, "filler")->value;
        assert_int_equal(strlen(filler), 300);
        assert_int_equal(filler[299], 'a' + tid);
        json_flat_free(&o);
        total++;
    }
    free(line);
    fclose(f);
    assert_int_equal(total, LOG_THREADS * records);
}

static void names_parse(void **state)
{
    (void)state;
    ib_log_format f = IB_LOG_FORMAT_AUTO;
    ib_log_sev s = IB_SEV_DEBUG;
    assert_int_equal(ib_log_format_parse(&f, "json"), 0);
    assert_int_equal(f, IB_LOG_FORMAT_JSON);
    assert_int_equal(ib_log_format_parse(&f, "TEXT"), 0);
    assert_int_equal(f, IB_LOG_FORMAT_TEXT);
    assert_int_equal(ib_log_format_parse(&f, "auto"), 0);
    assert_int_equal(f, IB_LOG_FORMAT_AUTO);
    assert_int_equal(ib_log_format_parse(&f, "yaml"), -1);
    assert_int_equal(ib_log_format_parse(&f, NULL), -1);
    assert_int_equal(ib_log_sev_parse(&s, "debug"), 0);
    assert_int_equal(s, IB_SEV_DEBUG);
    assert_int_equal(ib_log_sev_parse(&s, "info"), 0);
    assert_int_equal(s, IB_SEV_INFO);
    assert_int_equal(ib_log_sev_parse(&s, "warn"), 0);
    assert_int_equal(s, IB_SEV_WARN);
    assert_int_equal(ib_log_sev_parse(&s, "Warning"), 0);
    assert_int_equal(s, IB_SEV_WARN);
    assert_int_equal(ib_log_sev_parse(&s, "error"), 0);
    assert_int_equal(s, IB_SEV_ERROR);
    assert_int_equal(ib_log_sev_parse(&s, "fatal"), -1);
    assert_int_equal(ib_log_sev_parse(&s, ""), -1);
}

/* Parses the single JSON line in `text` with jansson, refusing duplicate
 * keys; `flags` may add JSON_DECODE_INT_AS_REAL. Free with json_decref. */
static json_t *jansson_one(const char *text, size_t flags)
{
    assert_int_equal(count_lines(text), 1);
    json_error_t jerr;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES | flags, &jerr);
    if (o == NULL)
        print_error("jansson refused (%s): %s", jerr.text, text);
    assert_true(json_is_object(o));
    return o;
}

static void json_numbers_and_booleans_keep_their_types(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log(IB_SEV_INFO, "typed", IB_LOG_I64("count", 42), IB_LOG_I64("negative", -7),
           IB_LOG_I64("i64_min", INT64_MIN), IB_LOG_U64("u64_small", 5),
           IB_LOG_U64("u64_i64_max", (uint64_t)INT64_MAX), IB_LOG_F64("quarter", 0.25),
           IB_LOG_F64("whole", 3.0), IB_LOG_F64("huge", 1e300), IB_LOG_F64("nan", NAN),
           IB_LOG_F64("inf", INFINITY), IB_LOG_F64("ninf", -INFINITY), IB_LOG_BOOL("yes", true),
           IB_LOG_BOOL("no", false), IB_LOG_STR("s", "quote\" back\\slash"),
           IB_LOG_STR("none", NULL));
    const char *text = capture_text(&c);
    json_t *o = jansson_one(text, 0);
    json_t *v = json_object_get(o, "count");
    assert_true(json_is_integer(v) && json_integer_value(v) == 42);
    v = json_object_get(o, "negative");
    assert_true(json_is_integer(v) && json_integer_value(v) == -7);
    v = json_object_get(o, "i64_min");
    assert_true(json_is_integer(v) && json_integer_value(v) == INT64_MIN);
    v = json_object_get(o, "u64_small");
    assert_true(json_is_integer(v) && json_integer_value(v) == 5);
    v = json_object_get(o, "u64_i64_max");
    assert_true(json_is_integer(v) && json_integer_value(v) == INT64_MAX);
    v = json_object_get(o, "quarter");
    assert_true(json_is_real(v) && json_real_value(v) == 0.25);
    v = json_object_get(o, "whole"); /* a real, not the integer 3 */
    assert_true(json_is_real(v) && json_real_value(v) == 3.0);
    v = json_object_get(o, "huge");
    assert_true(json_is_real(v) && json_real_value(v) == 1e300);
    assert_true(json_is_null(json_object_get(o, "nan")));
    assert_true(json_is_null(json_object_get(o, "inf")));
    assert_true(json_is_null(json_object_get(o, "ninf")));
    assert_true(json_is_true(json_object_get(o, "yes")));
    assert_true(json_is_false(json_object_get(o, "no")));
    assert_string_equal(json_string_value(json_object_get(o, "s")), "quote\" back\\slash");
    assert_true(json_is_null(json_object_get(o, "none")));
    assert_string_equal(json_string_value(json_object_get(o, "msg")), "typed");
    /* the exact text of the bare values */
    assert_non_null(strstr(text, ",\"count\":42,\"negative\":-7,"));
    assert_non_null(strstr(text, ",\"whole\":3.0,\"huge\":1e+300,\"nan\":null,"));
    assert_non_null(strstr(text, ",\"yes\":true,\"no\":false,"));
    json_decref(o);
    capture_close(&c);
}

/* 2^64 - 1 does not fit jansson's signed integers: the text must still be
 * the exact bare number, which a reader asked for reals takes. */
static void json_u64_max_is_a_bare_number(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log(IB_SEV_INFO, "big", IB_LOG_U64("max", UINT64_MAX));
    const char *text = capture_text(&c);
    assert_non_null(strstr(text, ",\"max\":18446744073709551615}\n"));
    json_t *o = jansson_one(text, JSON_DECODE_INT_AS_REAL);
    json_t *v = json_object_get(o, "max");
    assert_true(json_is_real(v) && json_real_value(v) == 18446744073709551615.0);
    json_decref(o);
    capture_close(&c);
}

/* Doubles are written with the fewest digits that read back exactly. */
static void json_doubles_read_back_exactly(void **state)
{
    (void)state;
    static const double values[] = {0.1,     1.0 / 3.0, -2.5,      123456789.125, 1e-300,
                                    DBL_MAX, DBL_MIN,   5e-324,    -0.0,          1e21,
                                    0.3,     2.0 / 3.0, 1e15 + 0.5};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        capture c;
        capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
        ib_log(IB_SEV_INFO, "d", IB_LOG_F64("v", values[i]));
        json_t *o = jansson_one(capture_text(&c), 0);
        json_t *v = json_object_get(o, "v");
        assert_true(json_is_real(v));
        assert_true(json_real_value(v) == values[i]);
        json_decref(o);
        capture_close(&c);
    }
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log(IB_SEV_INFO, "d", IB_LOG_F64("v", 0.1));
    assert_non_null(strstr(capture_text(&c), "\"v\":0.1}")); /* not 0.10000000000000001 */
    capture_close(&c);
}

/* A plugin that calls setlocale() may make printf's decimal point a
 * comma; the JSON must still hold "0.5". Skipped where no such locale is
 * installed. */
static void json_doubles_ignore_the_locale(void **state)
{
    (void)state;
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8",  "fr_FR.UTF-8",
                                        "fr_FR.utf8",  "ru_RU.UTF-8", "nl_NL.UTF-8"};
    const char *set = NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && set == NULL; i++)
        set = setlocale(LC_NUMERIC, names[i]);
    if (set == NULL || strcmp(localeconv()->decimal_point, ".") == 0) {
        setlocale(LC_NUMERIC, "C");
        skip();
    }
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log(IB_SEV_INFO, "d", IB_LOG_F64("half", 0.5), IB_LOG_F64("third", 1.0 / 3.0),
           IB_LOG_F64("big", 1.5e30));
    setlocale(LC_NUMERIC, "C");
    const char *text = capture_text(&c);
    assert_non_null(strstr(text, "\"half\":0.5,"));
    json_t *o = jansson_one(text, 0);
    assert_true(json_real_value(json_object_get(o, "third")) == 1.0 / 3.0);
    assert_true(json_real_value(json_object_get(o, "big")) == 1.5e30);
    json_decref(o);
    capture_close(&c);
}

static void typed_fields_keep_the_string_guarantees(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    /* reserved keys renamed; awkward keys and values escaped; an unknown
     * kind (a field built by hand) is null */
    ib_log_field odd = {.kind = (ib_log_kind)99, .key = "odd"};
    ib_log(IB_SEV_WARN, "real", IB_LOG_U64("msg", 1), IB_LOG_BOOL("level", true),
           IB_LOG_F64("ts", 1.5), IB_LOG_I64("we\"ird\n", -1),
           IB_LOG_STR("bytes", "bad\xff\"}\n{\"forged\":\"1"), odd);
    json_t *o = jansson_one(capture_text(&c), 0);
    assert_string_equal(json_string_value(json_object_get(o, "msg")), "real");
    assert_string_equal(json_string_value(json_object_get(o, "level")), "warn");
    assert_true(json_is_string(json_object_get(o, "ts")));
    assert_int_equal(json_integer_value(json_object_get(o, "_msg")), 1);
    assert_true(json_is_true(json_object_get(o, "_level")));
    assert_true(json_real_value(json_object_get(o, "_ts")) == 1.5);
    assert_int_equal(json_integer_value(json_object_get(o, "we\"ird\n")), -1);
    assert_string_equal(json_string_value(json_object_get(o, "bytes")),
                        "bad\xef\xbf\xbd\"}\n{\"forged\":\"1");
    assert_true(json_is_null(json_object_get(o, "odd")));
    assert_int_equal(json_object_size(o), 9);
    json_decref(o);
    capture_close(&c);

    /* the strict checker agrees on a record of strings written by ib_log */
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log(IB_SEV_INFO, awkward[3].in, IB_LOG_STR("value", awkward[3].in));
    json_flat jo;
    parse_one(&jo, capture_text(&c));
    assert_field(&jo, "value", awkward[3].want);
    json_flat_free(&jo);
    capture_close(&c);
}

static void text_renders_typed_fields(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_TEXT, IB_SEV_DEBUG);
    ib_log(IB_SEV_INFO, "consumer bound", IB_LOG_STR("durable", "has space"),
           IB_LOG_I64("ack_wait_ms", 30000), IB_LOG_I64("neg", -3), IB_LOG_U64("max", UINT64_MAX),
           IB_LOG_F64("f", 0.25), IB_LOG_F64("whole", 2.0), IB_LOG_F64("nan", NAN),
           IB_LOG_F64("inf", INFINITY), IB_LOG_F64("ninf", -INFINITY), IB_LOG_BOOL("yes", true),
           IB_LOG_BOOL("no", false), IB_LOG_STR("none", NULL), IB_LOG_U64("msg", 7));
    const char *text = capture_text(&c);
    assert_int_equal(count_lines(text), 1);
    assert_string_equal(text + 24, " INFO consumer bound durable=\"has space\" ack_wait_ms=30000 "
                                   "neg=-3 max=18446744073709551615 f=0.25 whole=2.0 nan=NaN "
                                   "inf=+Inf ninf=-Inf yes=true no=false none=- _msg=7\n");
    capture_close(&c);
}

static void typed_records_below_the_minimum_are_dropped(void **state)
{
    (void)state;
    capture c;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_WARN);
    ib_log(IB_SEV_INFO, "dropped", IB_LOG_U64("n", 1));
    ib_log_fields(IB_SEV_ERROR, "no fields", NULL, 0);
    const char *text = capture_text(&c);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, "\"level\":\"error\",\"msg\":\"no fields\"}\n"));
    capture_close(&c);
}

/* The checker must catch what a broken escaper would produce. */
static void json_checker_rejects_invalid_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"a\":\"raw\nnewline\"}",
        "{\"a\":\"bad \\x escape\"}",
        "{\"a\":\"\xff\"}",
        "{\"a\":\"x\",\"a\":\"y\"}",
        "{\"a\":\"x\"} trailing",
        "{\"a\":\"\\ud800\"}",
        "{\"a\":\"unterminated}",
        "{\"a\" \"x\"}",
        "[\"a\"]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_flat o;
        char why[128];
        assert_int_not_equal(json_check_object(&o, bad[i], strlen(bad[i]), why, sizeof(why)), 0);
        json_flat_free(&o);
    }
}

/* While the thread works for a traced event, every record names the trace
 * and the span, whichever call wrote it; once cleared, none does. */
static void traced_records_name_trace_and_span(void **state)
{
    (void)state;
    ib_trace t;
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_true(ib_trace_parse(&t, tp, strlen(tp)));
    capture c;
    json_flat o;
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_trace_current_set(&t);
    ib_logf(IB_SEV_INFO, "http", "request failed: %d", 503);
    parse_one(&o, capture_text(&c));
    assert_field(&o, "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_field(&o, "span_id", "00f067aa0ba902b7");
    assert_field(&o, "component", "http");
    json_flat_free(&o);
    capture_close(&c);

    capture_open(&c, IB_LOG_FORMAT_TEXT, IB_SEV_DEBUG);
    ib_log(IB_SEV_WARN, "handler failure", IB_LOG_U64("delivery_count", 2));
    const char *line = capture_text(&c);
    assert_non_null(strstr(line, " delivery_count=2 trace_id=4bf92f3577b34da6a3ce929d0e0e4736 "
                                 "span_id=00f067aa0ba902b7\n"));
    capture_close(&c);

    ib_trace_current_set(NULL);
    capture_open(&c, IB_LOG_FORMAT_JSON, IB_SEV_DEBUG);
    ib_log_kv(IB_SEV_INFO, "untraced", "k", "v", NULL);
    parse_one(&o, capture_text(&c));
    assert_null(json_get(&o, "trace_id"));
    assert_null(json_get(&o, "span_id"));
    json_flat_free(&o);
    capture_close(&c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(json_escapes_awkward_values),
    cmocka_unit_test(json_long_value_is_cut_at_a_character),
    cmocka_unit_test(timestamp_is_rfc3339_utc_with_ms),
    cmocka_unit_test(reserved_keys_are_never_duplicated),
    cmocka_unit_test(levels_below_the_minimum_are_dropped),
    cmocka_unit_test(logf_formats_message_and_component),
    cmocka_unit_test(text_format_is_one_escaped_line),
    cmocka_unit_test(auto_format_follows_the_terminal),
    cmocka_unit_test(concurrent_records_never_interleave),
    cmocka_unit_test(names_parse),
    cmocka_unit_test(json_checker_rejects_invalid_lines),
    cmocka_unit_test(json_numbers_and_booleans_keep_their_types),
    cmocka_unit_test(json_u64_max_is_a_bare_number),
    cmocka_unit_test(json_doubles_read_back_exactly),
    cmocka_unit_test(json_doubles_ignore_the_locale),
    cmocka_unit_test(typed_fields_keep_the_string_guarantees),
    cmocka_unit_test(text_renders_typed_fields),
    cmocka_unit_test(typed_records_below_the_minimum_are_dropped),
    cmocka_unit_test(traced_records_name_trace_and_span),
};

IB_TEST_MAIN(tests)
