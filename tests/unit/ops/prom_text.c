/* SPDX-License-Identifier: Apache-2.0 */
#include "prom_text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAMILIES 64

typedef struct family {
    char name[96];
    char type[16];
    int has_help;
} family;

static int fail(char *why, size_t why_len, const char *line, size_t line_len, const char *fmt, ...)
{
    char reason[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    snprintf(why, why_len, "%s: '%.*s'", reason, (int)(line_len > 120 ? 120 : line_len), line);
    return -1;
}

static int is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static int is_name_char(char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9');
}

/* Reads a metric or label name at s; returns its length (0 if none). */
static size_t name_len(const char *s, size_t n, int allow_colon)
{
    size_t i = 0;
    if (n == 0 || !is_name_start(s[0]) || (!allow_colon && s[0] == ':'))
        return 0;
    for (i = 1; i < n && is_name_char(s[i]) && (allow_colon || s[i] != ':'); i++)
        ;
    return i;
}

static family *find_family(family *f, size_t nf, const char *name)
{
    for (size_t i = 0; i < nf; i++)
        if (strcmp(f[i].name, name) == 0)
            return &f[i];
    return NULL;
}

/* Validates label text `name="v",...` between braces; returns its length up
 * to (not including) the closing brace, or -1. */
static long parse_labels(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '}')
        return 0;
    for (;;) {
        size_t ln = name_len(s + i, n - i, 0);
        if (ln == 0)
            return -1;
        i += ln;
        if (i + 1 >= n || s[i] != '=' || s[i + 1] != '"')
            return -1;
        i += 2;
        while (i < n && s[i] != '"') {
            if (s[i] == '\\') {
                if (i + 1 >= n || (s[i + 1] != '\\' && s[i + 1] != '"' && s[i + 1] != 'n'))
                    return -1;
                i += 2;
            } else if (s[i] == '\n') {
                return -1;
            } else {
                i++;
            }
        }
        if (i >= n)
            return -1;
        i++; /* closing quote */
        if (i < n && s[i] == '}')
            return (long)i;
        if (i >= n || s[i] != ',')
            return -1;
        i++;
    }
}

static int add_sample(prom_text *p, size_t *cap, const prom_sample *s)
{
    if (p->count == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        prom_sample *ns = realloc(p->samples, nc * sizeof(*ns));
        if (ns == NULL)
            return -1;
        p->samples = ns;
        *cap = nc;
    }
    p->samples[p->count++] = *s;
    return 0;
}

static double le_value(const char *labels)
{
    const char *le = strstr(labels, "le=\"");
    if (le == NULL)
        return NAN;
    le += 4;
    if (strncmp(le, "+Inf\"", 5) == 0)
        return INFINITY;
    char *end;
    double v = strtod(le, &end);
    return *end == '"' ? v : NAN;
}

/* The labels of a bucket sample without its le label (and the comma
 * before or after it): the labels its _sum and _count carry. */
static void labels_without_le(char *out, size_t out_len, const char *labels)
{
    const char *le = strstr(labels, "le=\"");
    if (le == NULL) {
        snprintf(out, out_len, "%s", labels);
        return;
    }
    const char *end = strchr(le + 4, '"');
    end = end != NULL ? end + 1 : le + strlen(le);
    size_t head = (size_t)(le - labels);
    if (head > 0 && labels[head - 1] == ',')
        head--; /* le was last: drop the comma before it */
    else if (*end == ',')
        end++; /* le was first: drop the comma after it */
    snprintf(out, out_len, "%.*s%s", (int)head, labels, end);
}

/* Checks the series of one histogram with the labels `key` (le aside):
 * buckets ordered and cumulative, ending in +Inf equal to _count, a _sum. */
static int check_histogram_series(const prom_text *p, const family *f, const char *key, char *why,
                                  size_t why_len)
{
    char bucket[112], count[112], sum[112], other[sizeof(p->samples[0].labels)];
    snprintf(bucket, sizeof(bucket), "%s_bucket", f->name);
    snprintf(count, sizeof(count), "%s_count", f->name);
    snprintf(sum, sizeof(sum), "%s_sum", f->name);
    double prev_le = -INFINITY, prev_v = 0, last_v = -1;
    int nb = 0, inf = 0;
    for (size_t i = 0; i < p->count; i++) {
        const prom_sample *s = &p->samples[i];
        if (strcmp(s->name, bucket) != 0)
            continue;
        labels_without_le(other, sizeof(other), s->labels);
        if (strcmp(other, key) != 0)
            continue;
        double le = le_value(s->labels);
        if (isnan(le) || le <= prev_le || s->value < prev_v) {
            snprintf(why, why_len, "%s: buckets not cumulative/ordered at le of '%s'", f->name,
                     s->labels);
            return -1;
        }
        prev_le = le;
        prev_v = s->value;
        last_v = s->value;
        inf = isinf(le);
        nb++;
    }
    double c = prom_text_value(p, count, key);
    double sm = prom_text_value(p, sum, key);
    if (nb == 0 || !inf || c < 0 || sm < 0 || c != last_v) {
        snprintf(why, why_len, "%s{%s}: missing +Inf/_count/_sum or _count != +Inf bucket", f->name,
                 key);
        return -1;
    }
    return 0;
}

/* Checks every labelled series of a histogram family; a family with no
 * series yet (labels registered later) is fine, a _count without buckets
 * is not. */
static int check_histogram(const prom_text *p, const family *f, char *why, size_t why_len)
{
    char bucket[112], count[112], key[sizeof(p->samples[0].labels)];
    snprintf(bucket, sizeof(bucket), "%s_bucket", f->name);
    snprintf(count, sizeof(count), "%s_count", f->name);
    for (size_t i = 0; i < p->count; i++) {
        const prom_sample *s = &p->samples[i];
        if (strcmp(s->name, bucket) == 0)
            labels_without_le(key, sizeof(key), s->labels);
        else if (strcmp(s->name, count) == 0)
            snprintf(key, sizeof(key), "%s", s->labels);
        else
            continue;
        if (check_histogram_series(p, f, key, why, why_len) != 0)
            return -1;
    }
    return 0;
}

int prom_text_parse(prom_text *out, const char *text, size_t len, char *why, size_t why_len)
{
    family fams[MAX_FAMILIES];
    size_t nf = 0, cap = 0;
    memset(out, 0, sizeof(*out));
    snprintf(why, why_len, "ok");
    if (len == 0 || text[len - 1] != '\n')
        return fail(why, why_len, "", 0, "text does not end with a newline");
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = (size_t)(nl - line);
        pos += n + 1;
        if (n == 0)
            continue;
        if (line[0] == '#') {
            int help = n > 7 && strncmp(line, "# HELP ", 7) == 0;
            int type = n > 7 && strncmp(line, "# TYPE ", 7) == 0;
            if (!help && !type)
                continue; /* a plain comment */
            size_t ln = name_len(line + 7, n - 7, 1);
            if (ln == 0 || ln >= sizeof(fams[0].name) || 7 + ln >= n || line[7 + ln] != ' ')
                goto bad;
            char name[96];
            memcpy(name, line + 7, ln);
            name[ln] = '\0';
            family *f = find_family(fams, nf, name);
            if (f == NULL) {
                if (nf == MAX_FAMILIES)
                    goto bad;
                f = &fams[nf++];
                memset(f, 0, sizeof(*f));
                memcpy(f->name, name, ln + 1);
            }
            if (help) {
                if (f->has_help)
                    return fail(why, why_len, line, n, "second HELP");
                f->has_help = 1;
            } else {
                const char *t = line + 8 + ln;
                size_t tl = n - 8 - ln;
                if (f->type[0] != '\0')
                    return fail(why, why_len, line, n, "second TYPE");
                if (!((tl == 7 && !strncmp(t, "counter", 7)) ||
                      (tl == 5 && !strncmp(t, "gauge", 5)) ||
                      (tl == 9 && !strncmp(t, "histogram", 9))))
                    return fail(why, why_len, line, n, "unknown TYPE");
                memcpy(f->type, t, tl);
                f->type[tl] = '\0';
            }
            continue;
        }
        prom_sample s;
        memset(&s, 0, sizeof(s));
        size_t ln = name_len(line, n, 1);
        if (ln == 0 || ln >= sizeof(s.name))
            goto bad;
        memcpy(s.name, line, ln);
        size_t i = ln;
        if (i < n && line[i] == '{') {
            long ll = parse_labels(line + i + 1, n - i - 1);
            if (ll < 0 || (size_t)ll >= sizeof(s.labels))
                return fail(why, why_len, line, n, "bad labels");
            memcpy(s.labels, line + i + 1, (size_t)ll);
            i += (size_t)ll + 2;
        }
        if (i >= n || line[i] != ' ')
            goto bad;
        i++;
        char num[64];
        if (n - i == 0 || n - i >= sizeof(num))
            goto bad;
        memcpy(num, line + i, n - i);
        num[n - i] = '\0';
        char *end;
        s.value = strtod(num, &end);
        if (*end != '\0' || end == num)
            return fail(why, why_len, line, n, "bad value");
        /* which family declared this sample? */
        family *f = find_family(fams, nf, s.name);
        if (f == NULL) {
            static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
            for (size_t k = 0; k < 3 && f == NULL; k++) {
                size_t sl = strlen(suffixes[k]);
                if (ln > sl && strcmp(s.name + ln - sl, suffixes[k]) == 0) {
                    char base[96];
                    memcpy(base, s.name, ln - sl);
                    base[ln - sl] = '\0';
                    f = find_family(fams, nf, base);
                    if (f != NULL && strcmp(f->type, "histogram") != 0)
                        f = NULL;
                }
            }
        }
        if (f == NULL || f->type[0] == '\0')
            return fail(why, why_len, line, n, "sample before its TYPE");
        if (strcmp(f->type, "counter") == 0 && s.value < 0)
            return fail(why, why_len, line, n, "negative counter");
        for (size_t k = 0; k < out->count; k++)
            if (!strcmp(out->samples[k].name, s.name) && !strcmp(out->samples[k].labels, s.labels))
                return fail(why, why_len, line, n, "duplicate series");
        if (add_sample(out, &cap, &s) != 0)
            return fail(why, why_len, line, n, "out of memory");
        continue;
    bad:
        return fail(why, why_len, line, n, "malformed line");
    }
    for (size_t k = 0; k < nf; k++) {
        if (fams[k].type[0] == '\0' || !fams[k].has_help)
            return fail(why, why_len, fams[k].name, strlen(fams[k].name),
                        "family without HELP/TYPE");
        if (strcmp(fams[k].type, "histogram") == 0 && check_histogram(out, &fams[k], why, why_len))
            return -1;
    }
    return 0;
}

void prom_text_free(prom_text *p)
{
    if (p != NULL) {
        free(p->samples);
        p->samples = NULL;
        p->count = 0;
    }
}

double prom_text_value(const prom_text *p, const char *name, const char *labels)
{
    for (size_t i = 0; i < p->count; i++)
        if (!strcmp(p->samples[i].name, name) && !strcmp(p->samples[i].labels, labels))
            return p->samples[i].value;
    return -1;
}
