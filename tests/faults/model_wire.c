/* SPDX-License-Identifier: Apache-2.0 */
/* The model test's wire (model_wire.h). */
#include "model_wire.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtest.h"

static const char *const op_names[OP_KINDS] = {
    "open",  "close", "owner",   "acquire", "mark",    "mark-plain", "release",
    "renew", "check", "is-proc", "lookup",  "inspect", "forget",     "prune",
    "end",   "list",  "stats",   "astats",  "upkeep",  "exit",
};

/* What a command carries after its name: a number argument, acquire's
 * three, keys. */
static bool has_arg(model_op_kind k)
{
    return k == OP_OPEN || k == OP_OWNER || k == OP_ACQUIRE || k == OP_RENEW || k == OP_PRUNE ||
           k == OP_ATTEMPT_STATS;
}

static bool has_keys(model_op_kind k)
{
    return k >= OP_ACQUIRE && k <= OP_LIST && k != OP_PRUNE;
}

/* Calls that take exactly one key. */
static bool one_key(model_op_kind k)
{
    return k >= OP_IS_PROCESSED && k <= OP_FORGET;
}

/* Replies that carry one answer per key of the command. */
static bool answers_keys(model_op_kind k)
{
    return has_keys(k) && k != OP_RELEASE && k != OP_END_ATTEMPTS && k != OP_INSPECT;
}

bool model_op_writes(model_op_kind kind)
{
    switch (kind) {
    case OP_ACQUIRE:
    case OP_MARK:
    case OP_MARK_PLAIN:
    case OP_RELEASE:
    case OP_RENEW:
    case OP_FORGET:
    case OP_PRUNE:
    case OP_END_ATTEMPTS:
        return true;
    default:
        return false;
    }
}

const char *model_op_name(model_op_kind kind)
{
    return (unsigned)kind < OP_KINDS ? op_names[kind] : "?";
}

const char *model_key_consumer(unsigned key)
{
    return key % 2 == 0 ? "model-a" : "model-b";
}

void model_key_id(char *out, unsigned key, uint64_t salt)
{
    rt_id(out, salt * MODEL_KEYS_MAX + key / 2);
}

/* Appends to buf at *at; false once it does not fit. */
static bool put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = *at < len ? vsnprintf(buf + *at, len - *at, fmt, ap) : -1;
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *at)
        return false;
    *at += (size_t)n;
    return true;
}

int model_op_format(char *buf, size_t len, const model_op *op)
{
    size_t at = 0;
    bool ok = put(buf, len, &at, "%u %s %s", op->seq, op->fault[0] != '\0' ? op->fault : "-",
                  model_op_name(op->kind));
    if (ok && has_arg(op->kind))
        ok = put(buf, len, &at, " %" PRId64, op->arg);
    if (ok && op->kind == OP_ACQUIRE)
        ok = put(buf, len, &at, " %d %" PRIu32, op->probe ? 1 : 0, op->max_attempts);
    if (ok && op->kind == OP_OPEN)
        ok = put(buf, len, &at, " %d", op->probe ? 1 : 0);
    for (size_t i = 0; ok && has_keys(op->kind) && i < op->n; i++)
        ok = put(buf, len, &at, " %u", (unsigned)op->keys[i]);
    if (ok)
        ok = put(buf, len, &at, "\n");
    return ok ? (int)at : -1;
}

/* The next space-separated word of *p as a number; false at the end of the
 * line or for anything but digits (with a leading '-'). */
static bool next_number(int64_t *out, const char **p)
{
    while (**p == ' ')
        (*p)++;
    char *end = NULL;
    if (**p == '\0')
        return false;
    long long v = strtoll(*p, &end, 10);
    if (end == *p || (*end != ' ' && *end != '\0'))
        return false;
    *out = v;
    *p = end;
    return true;
}

/* The next word of *p into out (cap bytes). */
static bool next_word(char *out, size_t cap, const char **p)
{
    while (**p == ' ')
        (*p)++;
    size_t n = strcspn(*p, " ");
    if (n == 0 || n >= cap)
        return false;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
    return true;
}

static int parse_keys(model_op *op, const char **p)
{
    int64_t v;
    op->n = 0;
    while (next_number(&v, p)) {
        if (op->n == MODEL_KEYS_MAX || v < 0 || v >= MODEL_KEYS_MAX)
            return -1;
        op->keys[op->n++] = (uint16_t)v;
    }
    if (**p != '\0' || (one_key(op->kind) && op->n != 1))
        return -1;
    return 0;
}

int model_op_parse(model_op *op, const char *line)
{
    char name[32];
    int64_t seq = 0, v = 0;
    memset(op, 0, sizeof(*op));
    if (!next_number(&seq, &line) || seq < 0 || !next_word(op->fault, sizeof(op->fault), &line) ||
        !next_word(name, sizeof(name), &line))
        return -1;
    op->seq = (unsigned)seq;
    if (strcmp(op->fault, "-") == 0)
        op->fault[0] = '\0';
    op->kind = OP_KINDS;
    for (int k = 0; k < OP_KINDS; k++)
        if (strcmp(name, op_names[k]) == 0)
            op->kind = (model_op_kind)k;
    if (op->kind == OP_KINDS || (has_arg(op->kind) && !next_number(&op->arg, &line)))
        return -1;
    if (op->kind == OP_ACQUIRE || op->kind == OP_OPEN) {
        if (!next_number(&v, &line) || (v != 0 && v != 1))
            return -1;
        op->probe = v == 1;
    }
    if (op->kind == OP_ACQUIRE) {
        if (!next_number(&v, &line) || v < 0 || v > UINT32_MAX)
            return -1;
        op->max_attempts = (uint32_t)v;
    }
    if (has_keys(op->kind))
        return parse_keys(op, &line);
    while (*line == ' ')
        line++;
    return *line == '\0' ? 0 : -1;
}

static bool put_answers(char *buf, size_t len, size_t *at, const model_op *op, const model_reply *r)
{
    bool ok = true;
    for (size_t i = 0; ok && i < r->n; i++) {
        if (op->kind == OP_ACQUIRE)
            ok = put(buf, len, at, " %d.%" PRIu32 ".%" PRId64, r->a[i].state, r->a[i].attempts,
                     r->a[i].remaining_ms);
        else
            ok = put(buf, len, at, " %d", r->a[i].state != 0);
    }
    return ok;
}

int model_reply_format(char *buf, size_t len, const model_op *op, const model_reply *r)
{
    size_t at = 0;
    bool ok = put(buf, len, &at, "%u %d %u", r->seq, r->status, r->fired);
    char text[MODEL_TEXT_MAX];
    snprintf(text, sizeof(text), "%s", r->text);
    for (char *c = text; *c != '\0'; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    if (ok && r->status != 0)
        ok = put(buf, len, &at, " ! %s", text);
    else if (ok && answers_keys(op->kind))
        ok = put_answers(buf, len, &at, op, r);
    else if (ok && op->kind == OP_OWNER)
        ok = put(buf, len, &at, " %s", text);
    else if (ok && op->kind == OP_INSPECT)
        ok = put(buf, len, &at, " %d %" PRId64 " %s", r->a[0].state, r->value,
                 text[0] != '\0' ? text : "-");
    else if (ok && op->kind == OP_PRUNE)
        ok = put(buf, len, &at, " %" PRId64, r->value);
    if (ok)
        ok = put(buf, len, &at, "\n");
    return ok ? (int)at : -1;
}

/* "state.attempts.remaining" of acquire's answers. */
static bool parse_claim(model_answer *a, const char **p)
{
    char word[64], *end = NULL;
    if (!next_word(word, sizeof(word), p))
        return false;
    a->state = (int)strtol(word, &end, 10);
    if (*end != '.')
        return false;
    a->attempts = (uint32_t)strtoul(end + 1, &end, 10);
    if (*end != '.')
        return false;
    a->remaining_ms = strtoll(end + 1, &end, 10);
    return *end == '\0';
}

static int parse_answers(model_reply *r, const model_op *op, const char **p)
{
    for (r->n = 0; r->n < op->n; r->n++) {
        int64_t v;
        model_answer *a = &r->a[r->n];
        if (op->kind == OP_ACQUIRE ? !parse_claim(a, p) : !next_number(&v, p))
            return -1;
        if (op->kind != OP_ACQUIRE)
            a->state = v != 0;
    }
    return 0;
}

static int parse_payload(model_reply *r, const model_op *op, const char *p)
{
    if (answers_keys(op->kind))
        return parse_answers(r, op, &p) == 0 && *p == '\0' ? 0 : -1;
    if (op->kind == OP_OWNER)
        return next_word(r->text, sizeof(r->text), &p) && *p == '\0' ? 0 : -1;
    if (op->kind == OP_PRUNE)
        return next_number(&r->value, &p) && *p == '\0' ? 0 : -1;
    if (op->kind == OP_INSPECT) {
        int64_t marked;
        if (!next_number(&marked, &p) || !next_number(&r->value, &p) ||
            !next_word(r->text, sizeof(r->text), &p) || *p != '\0')
            return -1;
        r->n = 1;
        r->a[0].state = marked != 0;
        if (strcmp(r->text, "-") == 0)
            r->text[0] = '\0';
        return 0;
    }
    return *p == '\0' ? 0 : -1;
}

int model_reply_parse(model_reply *r, const model_op *op, const char *line)
{
    int64_t seq, status, fired;
    memset(r, 0, sizeof(*r));
    if (!next_number(&seq, &line) || !next_number(&status, &line) || !next_number(&fired, &line) ||
        seq != (int64_t)op->seq || fired < 0)
        return -1;
    r->seq = (unsigned)seq;
    r->status = (int)status;
    r->fired = (unsigned)fired;
    if (status != 0) {
        if (strncmp(line, " ! ", 3) != 0)
            return -1;
        snprintf(r->text, sizeof(r->text), "%s", line + 3);
        return 0;
    }
    return parse_payload(r, op, line);
}
