/* SPDX-License-Identifier: Apache-2.0 */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spelling.h"

int ib_parse_duration_ms(int64_t *out, const char *text)
{
    char *end = NULL;
    if (text == NULL || !isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || v < 0)
        return -1;
    double scale;
    if (*end == '\0' || strcmp(end, "s") == 0)
        scale = 1000.0;
    else if (strcmp(end, "ms") == 0)
        scale = 1.0;
    else if (strcmp(end, "m") == 0)
        scale = 60000.0;
    else if (strcmp(end, "h") == 0)
        scale = 3600000.0;
    else if (strcmp(end, "d") == 0)
        scale = 86400000.0;
    else
        return -1;
    double ms = v * scale;
    if (ms > 9.0e15)
        return -1;
    *out = (int64_t)(ms + 0.5);
    return 0;
}

char *ib_opt_env_name(char *buf, size_t cap, const char *name)
{
    size_t i = 0;
    int w = snprintf(buf, cap, "IB_");
    for (i = 0; name[i] != '\0' && (size_t)w + i + 1 < cap; i++)
        buf[w + i] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
    buf[w + i] = '\0';
    return buf;
}

const char *ib_opt_metavar(const ib_opt *o)
{
    if (o->kind == IB_OPT_FLAG)
        return NULL;
    return o->metavar != NULL ? o->metavar : "VALUE";
}

static bool in_bounds(const ib_opt *o, int64_t v)
{
    return (o->min == 0 && o->max == 0) || (v >= o->min && v <= o->max);
}

static void list_add(ib_strlist *l, const char *v, ib_error *err, const char *name, ib_status *st)
{
    if (l->count == IB_STRLIST_MAX) {
        *st = ib_error_set(err, IB_ERR_CONFIG, "--%s: at most %d values", name, IB_STRLIST_MAX);
        return;
    }
    l->items[l->count++] = v;
    l->items[l->count] = NULL;
}

/* The index of `v` among the '|'-separated `choices`, or -1. */
static int choice_index(const char *choices, const char *v)
{
    size_t vlen = strlen(v);
    int i = 0;
    for (const char *c = choices; c != NULL; i++) {
        const char *bar = strchr(c, '|');
        size_t len = bar != NULL ? (size_t)(bar - c) : strlen(c);
        if (len == vlen && strncmp(c, v, len) == 0)
            return i;
        c = bar != NULL ? bar + 1 : NULL;
    }
    return -1;
}

/* `from` says where the value came from, for error messages. */
static ib_status set_value(const ib_opt *o, const char *v, const char *from, ib_error *err)
{
    ib_status st = IB_OK;
    char *end = NULL;
    switch (o->kind) {
    case IB_OPT_STRING:
        *(const char **)o->target = v;
        return IB_OK;
    case IB_OPT_LIST:
        list_add(o->target, v, err, o->name, &st);
        return st;
    case IB_OPT_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || !in_bounds(o, x)) {
            if (o->min != 0 || o->max != 0)
                return ib_error_set(err, IB_ERR_CONFIG,
                                    "%s: expected an integer in %lld..%lld, got '%s'", from,
                                    (long long)o->min, (long long)o->max, v);
            return ib_error_set(err, IB_ERR_CONFIG, "%s: expected an integer, got '%s'", from, v);
        }
        *(int64_t *)o->target = x;
        return IB_OK;
    }
    case IB_OPT_DURATION: {
        int64_t ms = 0;
        if (ib_parse_duration_ms(&ms, v) != 0)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "%s: expected a duration like 250ms, 30s, 5m, got '%s'", from, v);
        if (!in_bounds(o, ms))
            return ib_error_set(err, IB_ERR_CONFIG, "%s: %s is out of range %lldms..%lldms", from,
                                v, (long long)o->min, (long long)o->max);
        *(int64_t *)o->target = ms;
        return IB_OK;
    }
    case IB_OPT_FLAG:
        if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0)
            *(bool *)o->target = true;
        else if (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
                 v[0] == '\0')
            *(bool *)o->target = false;
        else
            return ib_error_set(err, IB_ERR_CONFIG, "%s: expected true or false, got '%s'", from,
                                v);
        return IB_OK;
    case IB_OPT_CHOICE: {
        int i = o->metavar != NULL ? choice_index(o->metavar, v) : -1;
        if (i < 0)
            return ib_error_set(err, IB_ERR_CONFIG, "%s: expected one of %s, got '%s'", from,
                                o->metavar != NULL ? o->metavar : "?", v);
        *(int *)o->target = i;
        return IB_OK;
    }
    case IB_OPT_DOUBLE: {
        errno = 0;
        double d = strtod(v, &end);
        if (errno != 0 || end == v || *end != '\0')
            return ib_error_set(err, IB_ERR_CONFIG, "%s: expected a number, got '%s'", from, v);
        *(double *)o->target = d;
        return IB_OK;
    }
    }
    return ib_error_set(err, IB_ERR_CONFIG, "%s: unknown option kind", from);
}

static ib_status apply_env(const ib_opt *o, ib_error *err)
{
    char name[128], from[160];
    ib_opt_env_name(name, sizeof(name), o->name);
    const char *v = getenv(name);
    if (v == NULL)
        return IB_OK;
    snprintf(from, sizeof(from), "%s (environment)", name);
    if (o->kind != IB_OPT_LIST)
        return set_value(o, v, from, err);
    ib_strlist *l = o->target;
    free(l->owned_);
    l->owned_ = strdup(v);
    l->count = 0;
    l->items[0] = NULL;
    if (l->owned_ == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "%s: out of memory", name);
    char *save = NULL;
    for (char *tok = strtok_r(l->owned_, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        ib_status st = set_value(o, tok, from, err);
        if (st != IB_OK)
            return st;
    }
    return IB_OK;
}

static const ib_opt *find(const ib_opt *opts, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

/* The option a mistyped `name` most likely meant: the nearest within
 * three edits (one for names of up to four bytes), or one it is the start
 * of; NULL when none is near. */
static const ib_opt *nearest(const ib_opt *opts, size_t n, const char *name, size_t len)
{
    const ib_opt *best = NULL;
    size_t best_d = len <= 4 ? 2 : 4;
    for (size_t i = 0; i < n; i++) {
        size_t d = ib_spelling_distance(name, len, opts[i].name, strlen(opts[i].name), false);
        if (len >= 3 && strncmp(opts[i].name, name, len) == 0)
            d = d < 1 ? d : 1;
        if (d < best_d) {
            best_d = d;
            best = &opts[i];
        }
    }
    return best;
}

/* The error for an option no entry names, with the nearest one. */
static ib_status unknown_option(const ib_opt *opts, size_t n, const char *name, size_t len,
                                ib_error *err)
{
    const ib_opt *near = nearest(opts, n, name, len);
    if (near != NULL)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "unknown option --%.*s: did you mean --%s? (see --help)", (int)len,
                            name, near->name);
    return ib_error_set(err, IB_ERR_CONFIG, "unknown option --%.*s (see --help)", (int)len, name);
}

ib_status ib_opts_parse(const ib_opt *opts, size_t n, int argc, char **argv, ib_strlist *positional,
                        bool *help, ib_error *err)
{
    ib_status st;
    bool list_seen[128] = {false};

    *help = false;
    for (size_t i = 0; i < n; i++) {
        if (opts[i].kind == IB_OPT_LIST) {
            ib_strlist *l = opts[i].target;
            l->count = 0;
            l->items[0] = NULL;
        }
        if (opts[i].def != NULL &&
            (st = set_value(&opts[i], opts[i].def, opts[i].name, err)) != IB_OK)
            return st;
    }
    for (size_t i = 0; i < n; i++)
        if ((st = apply_env(&opts[i], err)) != IB_OK)
            return st;

    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = true;
            return IB_OK;
        }
        if (strcmp(arg, "--") == 0) {
            for (a++; a < argc; a++)
                if (positional == NULL)
                    return ib_error_set(err, IB_ERR_CONFIG, "unexpected argument '%s'", argv[a]);
                else
                    list_add(positional, argv[a], err, "arguments", &st);
            break;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (positional == NULL)
                return ib_error_set(err, IB_ERR_CONFIG, "unexpected argument '%s'", arg);
            st = IB_OK;
            list_add(positional, arg, err, "arguments", &st);
            if (st != IB_OK)
                return st;
            continue;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq != NULL ? (size_t)(eq - name) : strlen(name);
        const ib_opt *o = find(opts, n, name, nlen);
        if (o == NULL)
            return unknown_option(opts, n, name, nlen, err);
        const char *v;
        if (o->kind == IB_OPT_FLAG && eq == NULL) {
            v = "true";
        } else if (eq != NULL) {
            v = eq + 1;
        } else if (a + 1 < argc) {
            v = argv[++a];
        } else {
            return ib_error_set(err, IB_ERR_CONFIG, "--%s: missing value", o->name);
        }
        if (o->kind == IB_OPT_LIST) {
            size_t idx = (size_t)(o - opts);
            ib_strlist *l = o->target;
            if (idx < 128 && !list_seen[idx]) {
                list_seen[idx] = true;
                l->count = 0; /* flags replace the environment's list */
                l->items[0] = NULL;
            }
        }
        char from[140];
        snprintf(from, sizeof(from), "--%s", o->name);
        if ((st = set_value(o, v, from, err)) != IB_OK)
            return st;
    }
    return IB_OK;
}

void ib_opts_usage(FILE *out, const ib_opt *opts, size_t n)
{
    char env[128], flag[160];
    for (size_t i = 0; i < n; i++) {
        const ib_opt *o = &opts[i];
        const char *metavar = ib_opt_metavar(o);
        ib_opt_env_name(env, sizeof(env), o->name);
        if (metavar == NULL)
            snprintf(flag, sizeof(flag), "--%s", o->name);
        else
            snprintf(flag, sizeof(flag), "--%s %s", o->name, metavar);
        fprintf(out, "  %-34s %s%s\n", flag, o->help,
                o->kind == IB_OPT_LIST ? " (repeatable)" : "");
        fprintf(out, "  %-34s [%s%s%s]\n", "", env, o->def ? "; default " : "",
                o->def ? o->def : "");
    }
}

void ib_opts_release(const ib_opt *opts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (opts[i].kind == IB_OPT_LIST) {
            ib_strlist *l = opts[i].target;
            free(l->owned_);
            l->owned_ = NULL;
        }
    }
}
