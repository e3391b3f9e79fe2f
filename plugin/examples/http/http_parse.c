/* SPDX-License-Identifier: Apache-2.0 */
/* The http plugin's configuration and Retry-After parsers (http_parse.h). */
#include "http_parse.h"
#include "redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A header name is an RFC 9110 token. */
static bool header_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c) != NULL))
            return false;
    }
    return true;
}

/* Headers the plugin sets itself; one from the configuration would be sent
 * twice or contradict the body. */
static bool header_reserved(const char *s, size_t n)
{
    static const char *const own[] = {"idempotency-key",
                                      "ibus-consumer",
                                      "ibus-event-type",
                                      "ibus-delivery-count",
                                      "content-type",
                                      "content-length",
                                      NULL};
    for (size_t i = 0; own[i] != NULL; i++)
        if (strlen(own[i]) == n && strncasecmp(own[i], s, n) == 0)
            return true;
    return false;
}

/* Adds "Name:Value" (s, n bytes) as "Name: Value". The value is trimmed
 * and may hold no control byte (no header injection); it is never echoed
 * in an error, since it is often a token. */
static int add_header(ib_http_config *cfg, const char *s, size_t n, char *errbuf, size_t errlen)
{
    const char *colon = memchr(s, ':', n);
    size_t nl = colon != NULL ? (size_t)(colon - s) : n;
    if (colon == NULL || !header_name_ok(s, nl)) {
        snprintf(errbuf, errlen, "header: expected Name:Value with a token as the name");
        return -1;
    }
    if (header_reserved(s, nl)) {
        snprintf(errbuf, errlen, "header %.*s: the plugin sets this header itself", (int)nl, s);
        return -1;
    }
    const char *v = colon + 1, *end = s + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    for (const char *p = v; p < end; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            snprintf(errbuf, errlen, "header %.*s: a control byte in its value", (int)nl, s);
            return -1;
        }
    }
    if (cfg->header_count == IB_HTTP_MAX_HEADERS) {
        snprintf(errbuf, errlen, "at most %d headers", IB_HTTP_MAX_HEADERS);
        return -1;
    }
    size_t vl = (size_t)(end - v);
    char *h = malloc(nl + vl + 3);
    if (h == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    memcpy(h, s, nl);
    memcpy(h + nl, ": ", 2);
    memcpy(h + nl + 2, v, vl);
    h[nl + 2 + vl] = '\0';
    cfg->headers[cfg->header_count++] = h;
    return 0;
}

/* types=a b c: event types separated by spaces (a type holds none), or
 * "*" for every type. */
static int set_types(ib_http_config *cfg, const char *v, size_t n, char *errbuf, size_t errlen)
{
    if (n == 1 && v[0] == '*')
        return 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j] != ' ')
            j++;
        if (j > i) {
            if (cfg->type_count == IB_HTTP_MAX_TYPES || j - i > 255) {
                snprintf(errbuf, errlen, "types: at most %d types of 255 bytes", IB_HTTP_MAX_TYPES);
                return -1;
            }
            if ((cfg->types[cfg->type_count] = dup_n(v + i, j - i)) == NULL) {
                snprintf(errbuf, errlen, "out of memory");
                return -1;
            }
            cfg->type_count++;
        }
        i = j + 1;
    }
    if (cfg->type_count == 0) {
        snprintf(errbuf, errlen, "types: expected event types separated by spaces, or *");
        return -1;
    }
    return 0;
}

/* A duration "1500ms", "2s" or a bare number of milliseconds, 1 ms .. 1 h. */
static int parse_ms(int64_t *out, const char *v, size_t n)
{
    int64_t x = 0, unit = 1;
    size_t i = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
        x = x * 10 + (v[i] - '0');
        if (x > 3600000)
            return -1;
    }
    if (i == 0)
        return -1;
    if (n - i == 1 && v[i] == 's')
        unit = 1000;
    else if (!(n == i || (n - i == 2 && v[i] == 'm' && v[i + 1] == 's')))
        return -1;
    x *= unit;
    if (x < 1 || x > 3600000)
        return -1;
    *out = x;
    return 0;
}

/* Stores a copy of the value of a key that may appear once. */
static int set_once(char **slot, const char *key, const char *v, size_t n, char *errbuf,
                    size_t errlen)
{
    if (*slot != NULL) {
        snprintf(errbuf, errlen, "%s= given twice", key);
        return -1;
    }
    if (n == 0) {
        snprintf(errbuf, errlen, "%s=: empty value", key);
        return -1;
    }
    if ((*slot = dup_n(v, n)) == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int set_number(ib_http_config *cfg, const char *k, size_t kl, const char *v, size_t n,
                      char *errbuf, size_t errlen)
{
    if (kl == 7 && memcmp(k, "timeout", 7) == 0) {
        if (parse_ms(&cfg->timeout_ms, v, n) == 0)
            return 0;
        snprintf(errbuf, errlen, "timeout=%.*s: expected 1ms..3600s (e.g. 5s, 500ms)",
                 (int)(n > 32 ? 32 : n), v);
        return -1;
    }
    unsigned x = 0;
    size_t i = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9' && x <= 1024; i++)
        x = x * 10 + (unsigned)(v[i] - '0');
    if (i == 0 || i != n || x < 1 || x > 1024) {
        snprintf(errbuf, errlen, "concurrency=%.*s: expected 1..1024", (int)(n > 32 ? 32 : n), v);
        return -1;
    }
    cfg->concurrency = x;
    return 0;
}

/* One key=value pair. No value may hold a control byte: url= becomes the
 * request line, header values header lines, and the paths are opened by
 * name. */
static int set_key(ib_http_config *cfg, const char *k, size_t kl, const char *v, size_t n,
                   char *errbuf, size_t errlen)
{
#define KEY(name) (kl == sizeof(name) - 1 && memcmp(k, name, kl) == 0)
    for (size_t i = 0; i < n && !KEY("header"); i++) {
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
            snprintf(errbuf, errlen, "%.*s=: a control byte in its value (byte %zu)",
                     (int)(kl > 32 ? 32 : kl), k, i);
            return -1;
        }
    }
    if (KEY("url"))
        return set_once(&cfg->url, "url", v, n, errbuf, errlen);
    if (KEY("types"))
        return set_types(cfg, v, n, errbuf, errlen);
    if (KEY("timeout") || KEY("concurrency"))
        return set_number(cfg, k, kl, v, n, errbuf, errlen);
    if (KEY("header"))
        return add_header(cfg, v, n, errbuf, errlen);
    if (KEY("header_file"))
        return set_once(&cfg->header_file, "header_file", v, n, errbuf, errlen);
    if (KEY("ca"))
        return set_once(&cfg->ca, "ca", v, n, errbuf, errlen);
    if (KEY("cert"))
        return set_once(&cfg->cert, "cert", v, n, errbuf, errlen);
    if (KEY("key"))
        return set_once(&cfg->key, "key", v, n, errbuf, errlen);
    if (KEY("format")) {
        if (n == 4 && memcmp(v, "json", 4) == 0)
            cfg->format = IB_HTTP_JSON;
        else if (n == 8 && memcmp(v, "protobuf", 8) == 0)
            cfg->format = IB_HTTP_PROTOBUF;
        else {
            snprintf(errbuf, errlen, "format=%.*s: expected json or protobuf",
                     (int)(n > 32 ? 32 : n), v);
            return -1;
        }
        return 0;
    }
#undef KEY
    snprintf(errbuf, errlen,
             "unknown key '%.*s' (known: url types timeout concurrency header header_file "
             "format ca cert key)",
             (int)(kl > 32 ? 32 : kl), k);
    return -1;
}

/* The checks that need the whole configuration. */
static int check_config(const ib_http_config *cfg, char *errbuf, size_t errlen)
{
    if (cfg->url == NULL) {
        snprintf(errbuf, errlen, "url= is required (e.g. url=http://127.0.0.1:8080/events)");
        return -1;
    }
    if (strncmp(cfg->url, "http://", 7) != 0 && strncmp(cfg->url, "https://", 8) != 0) {
        char shown[IB_REDACT_MAX];
        snprintf(errbuf, errlen, "url=%.200s: expected an http:// or https:// URL",
                 ib_redact_url(shown, sizeof(shown), cfg->url));
        return -1;
    }
    if ((cfg->cert == NULL) != (cfg->key == NULL)) {
        snprintf(errbuf, errlen, "cert= and key= go together (a client certificate and its key)");
        return -1;
    }
    return 0;
}

int ib_http_config_parse(ib_http_config *out, const char *config, char *errbuf, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->timeout_ms = IB_HTTP_DEFAULT_TIMEOUT_MS;
    for (const char *p = config; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (len > 0 && eq == NULL) {
            snprintf(errbuf, errlen, "'%.*s': expected key=value", (int)(len > 32 ? 32 : len), p);
            goto fail;
        }
        if (len > 0 && set_key(out, p, (size_t)(eq - p), eq + 1, len - (size_t)(eq - p) - 1, errbuf,
                               errlen) != 0)
            goto fail;
        p += len + (end != NULL);
    }
    if (check_config(out, errbuf, errlen) == 0)
        return 0;
fail:
    ib_http_config_free(out);
    return -1;
}

int ib_http_config_add_header_text(ib_http_config *cfg, const char *text, char *errbuf,
                                   size_t errlen)
{
    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
        size_t l = len;
        if (l > 0 && p[l - 1] == '\r')
            l--;
        if (l > 0 && p[0] != '#' && add_header(cfg, p, l, errbuf, errlen) != 0)
            return -1;
        p += len + (nl != NULL);
    }
    return 0;
}

void ib_http_config_free(ib_http_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->url);
    for (size_t i = 0; i < cfg->type_count; i++)
        free(cfg->types[i]);
    for (size_t i = 0; i < cfg->header_count; i++)
        free(cfg->headers[i]);
    free(cfg->header_file);
    free(cfg->ca);
    free(cfg->cert);
    free(cfg->key);
    memset(cfg, 0, sizeof(*cfg));
}

bool ib_http_config_wants(const ib_http_config *cfg, const char *type)
{
    if (cfg->type_count == 0)
        return true;
    for (size_t i = 0; i < cfg->type_count; i++)
        if (strcmp(cfg->types[i], type) == 0)
            return true;
    return false;
}

/* ---- Retry-After -------------------------------------------------------- */

#define RETRY_AFTER_MAX_MS (24 * 3600 * 1000LL)

/* Reads exactly `n` digits. */
static bool digits(const char *s, size_t n, int *out)
{
    int x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *out = x;
    return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), without timegm's
 * dependence on the process's time zone. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* "Wed, 21 Oct 2015 07:28:00 GMT": 29 bytes, fixed positions. */
static int parse_imf_date(int64_t *out_s, const char *v)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    int day, year, hh, mm, ss, mon = -1;
    if (strlen(v) != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' ||
        v[16] != ' ' || v[19] != ':' || v[22] != ':' || strcmp(v + 25, " GMT") != 0)
        return -1;
    for (int i = 0; i < 12; i++)
        if (memcmp(v + 8, months + 3 * i, 3) == 0)
            mon = i + 1;
    if (mon < 0 || !digits(v + 5, 2, &day) || !digits(v + 12, 4, &year) ||
        !digits(v + 17, 2, &hh) || !digits(v + 20, 2, &mm) || !digits(v + 23, 2, &ss))
        return -1;
    if (day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    *out_s = days_from_civil(year, mon, day) * 86400 + hh * 3600 + mm * 60 + ss;
    return 0;
}

int ib_http_retry_after_ms(int64_t *out_ms, const char *value, int64_t now_s)
{
    const char *v = value;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    if (n == 0)
        return -1;
    if (v[0] >= '0' && v[0] <= '9') {
        int64_t s = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i] < '0' || v[i] > '9')
                return -1;
            if (s < RETRY_AFTER_MAX_MS / 1000)
                s = s * 10 + (v[i] - '0');
        }
        *out_ms = s * 1000 > RETRY_AFTER_MAX_MS ? RETRY_AFTER_MAX_MS : s * 1000;
        return 0;
    }
    char date[30];
    int64_t at;
    if (n != 29)
        return -1;
    memcpy(date, v, 29);
    date[29] = '\0';
    if (parse_imf_date(&at, date) != 0)
        return -1;
    int64_t d = at - now_s;
    *out_ms = d <= 0 ? 0 : d >= RETRY_AFTER_MAX_MS / 1000 ? RETRY_AFTER_MAX_MS : d * 1000;
    return 0;
}

int ib_http_status_phrase(char *out, size_t cap, const char *line, size_t len)
{
    size_t i = 5, o = 0;
    out[0] = '\0';
    if (len < 5 || memcmp(line, "HTTP/", 5) != 0)
        return -1;
    while (i < len && line[i] != ' ') /* the version */
        i++;
    if (i + 4 >= len || line[i + 4] != ' ')
        return -1;
    for (size_t d = i + 1; d < i + 4; d++)
        if (line[d] < '0' || line[d] > '9')
            return -1;
    for (i += 5; i < len && o + 1 < cap; i++)
        if (line[i] >= 0x20 && line[i] < 0x7f)
            out[o++] = line[i];
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
    return o > 0 ? 0 : -1;
}
