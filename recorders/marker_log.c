/* SPDX-License-Identifier: Apache-2.0 */
/* The marker log's records, version 1 (marker_log.h says the format). */
#include "marker_log.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

static const uint8_t magic[4] = {'I', 'B', 'M', 'L'};

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A consumer name as the format allows it: 1..255 bytes of UTF-8 with no
 * control character. */
static bool name_valid(const char *s, size_t len)
{
    if (len == 0 || len > IB_MARKER_LOG_NAME_MAX || !ib__utf8_valid(s, len))
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static bool kind_valid(unsigned kind)
{
    return kind >= IB_MARKER_LOG_CLAIMED && kind <= IB_MARKER_LOG_RELEASED;
}

size_t ib_marker_log_size(const ib_marker_log_record *rec)
{
    size_t n = IB_MARKER_LOG_HEADER + rec->nentries * IB_MARKER_LOG_ENTRY;
    for (size_t i = 0; i < rec->nnames; i++)
        n += 1 + strlen(rec->names[i]);
    return n;
}

/* Whether `rec` may be written; says why not in `err`. */
static ib_status record_check(const ib_marker_log_record *rec, ib_error *err)
{
    if (!kind_valid(rec->kind))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: unknown kind %d",
                            (int)rec->kind);
    if (rec->nnames < 1 || rec->nnames > IB_MARKER_LOG_CONSUMERS_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: %zu consumers (1 to %u)",
                            rec->nnames, IB_MARKER_LOG_CONSUMERS_MAX);
    if (rec->nentries < 1 || rec->nentries > IB_MARKER_LOG_ENTRIES_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: %zu entries (1 to %u)",
                            rec->nentries, IB_MARKER_LOG_ENTRIES_MAX);
    for (size_t i = 0; i < rec->nnames; i++)
        if (rec->names[i] == NULL || !name_valid(rec->names[i], strlen(rec->names[i])))
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "marker log record: consumer %zu is not 1 to %u bytes of "
                                "UTF-8 without control characters",
                                i, IB_MARKER_LOG_NAME_MAX);
    for (size_t i = 0; i < rec->nentries; i++)
        if (rec->entries[i].consumer >= rec->nnames)
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "marker log record: entry %zu names consumer %u of %zu", i,
                                (unsigned)rec->entries[i].consumer, rec->nnames);
    return IB_OK;
}

ib_status ib_marker_log_encode(const ib_marker_log_record *rec, uint8_t *out, size_t cap,
                               size_t *len, ib_error *err)
{
    ib_status st = record_check(rec, err);
    if (st != IB_OK)
        return st;
    size_t need = ib_marker_log_size(rec);
    if (need > cap)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "marker log record: %zu bytes do not fit in %zu", need, cap);
    memcpy(out, magic, sizeof(magic));
    out[4] = IB_MARKER_LOG_VERSION;
    out[5] = (uint8_t)rec->kind;
    put16(out + 6, (uint16_t)rec->nnames);
    put32(out + 8, rec->partition);
    put64(out + 12, rec->epoch);
    put64(out + 20, rec->sequence);
    put32(out + 28, (uint32_t)rec->nentries);
    uint8_t *p = out + IB_MARKER_LOG_HEADER;
    for (size_t i = 0; i < rec->nnames; i++) {
        size_t n = strlen(rec->names[i]);
        *p++ = (uint8_t)n;
        memcpy(p, rec->names[i], n);
        p += n;
    }
    for (size_t i = 0; i < rec->nentries; i++) {
        const ib_marker_log_entry *e = &rec->entries[i];
        put16(p, e->consumer);
        memcpy(p + 2, e->id, 16);
        put64(p + 18, e->fingerprint);
        p += IB_MARKER_LOG_ENTRY;
    }
    *len = need;
    return IB_OK;
}

/* Reads the names of a record whose header said `count`, from `*p` (up
 * to `end`), into `names`; advances *p. */
static ib_status names_read(const uint8_t **p, const uint8_t *end, size_t count,
                            ib_marker_log_names *names, ib_error *err)
{
    char *text = names->text;
    for (size_t i = 0; i < count; i++) {
        if (*p >= end)
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "marker log record: ends inside consumer name %zu", i);
        size_t n = **p;
        (*p)++;
        if ((size_t)(end - *p) < n)
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "marker log record: ends inside consumer name %zu", i);
        if (!name_valid((const char *)*p, n))
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "marker log record: consumer name %zu is not 1 to %u bytes of "
                                "UTF-8 without control characters",
                                i, IB_MARKER_LOG_NAME_MAX);
        memcpy(text, *p, n);
        text[n] = '\0';
        names->at[i] = text;
        text += n + 1;
        *p += n;
    }
    return IB_OK;
}

ib_status ib_marker_log_decode(ib_marker_log_record *rec, const uint8_t *in, size_t len,
                               ib_marker_log_names *names, ib_marker_log_entry *entries, size_t cap,
                               ib_error *err)
{
    if (len < IB_MARKER_LOG_HEADER || memcmp(in, magic, sizeof(magic)) != 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "marker log record: not a record (no IBML header)");
    if (in[4] != IB_MARKER_LOG_VERSION)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "marker log record: version %u, this build reads %d", in[4],
                            IB_MARKER_LOG_VERSION);
    if (!kind_valid(in[5]))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: unknown kind %u", in[5]);
    size_t nnames = get16(in + 6), nentries = get32(in + 28);
    if (nnames < 1 || nnames > IB_MARKER_LOG_CONSUMERS_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: %zu consumers (1 to %u)",
                            nnames, IB_MARKER_LOG_CONSUMERS_MAX);
    if (nentries < 1 || nentries > IB_MARKER_LOG_ENTRIES_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: %zu entries (1 to %u)",
                            nentries, IB_MARKER_LOG_ENTRIES_MAX);
    if (nentries > cap)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log record: %zu entries, room for %zu",
                            nentries, cap);
    const uint8_t *p = in + IB_MARKER_LOG_HEADER, *end = in + len;
    ib_status st = names_read(&p, end, nnames, names, err);
    if (st != IB_OK)
        return st;
    if ((size_t)(end - p) != nentries * IB_MARKER_LOG_ENTRY)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "marker log record: %zu bytes of entries where %zu entries take %zu",
                            (size_t)(end - p), nentries, nentries * IB_MARKER_LOG_ENTRY);
    for (size_t i = 0; i < nentries; i++, p += IB_MARKER_LOG_ENTRY) {
        ib_marker_log_entry *e = &entries[i];
        e->consumer = get16(p);
        if (e->consumer >= nnames)
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "marker log record: entry %zu names consumer %u of %zu", i,
                                (unsigned)e->consumer, nnames);
        memcpy(e->id, p + 2, 16);
        e->fingerprint = get64(p + 18);
    }
    rec->kind = (ib_marker_log_kind)in[5];
    rec->partition = get32(in + 8);
    rec->epoch = get64(in + 12);
    rec->sequence = get64(in + 20);
    rec->names = names->at;
    rec->nnames = nnames;
    rec->entries = entries;
    rec->nentries = nentries;
    return IB_OK;
}

bool ib_marker_log_msg_id(char *out, size_t cap, const char *durable, uint32_t partition,
                          uint64_t epoch, uint64_t sequence)
{
    int n = snprintf(out, cap, "ibml-%s-%" PRIu32 "-%" PRIu64 "-%" PRIu64, durable, partition,
                     epoch, sequence);
    return n > 0 && (size_t)n < cap;
}
