/* SPDX-License-Identifier: Apache-2.0 */
/* ibus dlq: printing dead letters as a table, JSON lines, or in full
 * (dlq.h). */
#include "dlq.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "event.h"
#include "utf8.h"

static const char *or_dash(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : "-";
}

/* The CONSUMER column names the handler whose verdict it was (its
 * consumer identity, which begins with the durable by default), or the
 * durable where no handler decided (decode, invalid-id, older dead
 * letters). */
void ib_dlq_print_header(FILE *out)
{
    fprintf(out, "%-6s %-24s %-11s %-24s %-32s %-20s %4s %s\n", "SEQ", "TIME", "REASON", "CONSUMER",
            "EVENT ID", "TYPE", "DELV", "ERROR");
}

void ib_dlq_print_row(FILE *out, const ib_dlq_entry *e)
{
    char t[40];
    fprintf(out, "%-6" PRIu64 " %-24s %-11s %-24s %-32s %-20s %4" PRIu64 " %s\n", e->seq,
            ib_dlq_format_time(t, sizeof(t), e->time_ms), or_dash(e->reason),
            or_dash(e->handler != NULL ? e->handler : e->consumer), or_dash(e->event_id),
            or_dash(e->event_type), e->deliveries, or_dash(e->error));
}

static void set_str(json_t *o, const char *key, const char *value)
{
    json_object_set_new(o, key, value != NULL ? json_string(value) : json_null());
}

/* Header values are not checked by anyone: a value that is not UTF-8
 * becomes null rather than breaking the line. */
int ib_dlq_print_json(FILE *out, const ib_dlq_entry *e)
{
    char t[40];
    json_t *o = json_object();
    if (o == NULL)
        return -1;
    json_object_set_new(o, "seq", json_integer((json_int_t)e->seq));
    set_str(o, "time", ib_dlq_format_time(t, sizeof(t), e->time_ms));
    set_str(o, "reason", e->reason);
    set_str(o, "consumer", e->consumer);
    set_str(o, "handler", e->handler);
    set_str(o, "id", e->event_id);
    set_str(o, "type", e->event_type);
    json_object_set_new(o, "deliveries", json_integer((json_int_t)e->deliveries));
    set_str(o, "error", e->error);
    set_str(o, "subject", e->subject);
    set_str(o, "stream", e->stream);
    json_object_set_new(o, "stream_seq", json_integer((json_int_t)e->stream_seq));
    set_str(o, "trace_id", e->trace_id);
    set_str(o, "span_id", e->span_id);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (text == NULL)
        return -1;
    fprintf(out, "%s\n", text);
    free(text);
    return 0;
}

/* Writes `len` bytes of text with every control byte as \xNN, but for
 * those in `keep` (newlines of a payload): anyone who can publish to the
 * dead-letter subject chooses these bytes, and an escape sequence would
 * reach the operator's terminal. */
static void put_text(FILE *out, const char *p, size_t len, const char *keep)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 || c == 0x7f) && (c == 0 || strchr(keep, c) == NULL))
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
}

static void put_str(FILE *out, const char *s)
{
    put_text(out, s, strlen(s), "");
}

static void print_bytes(FILE *out, const char *label, const uint8_t *p, size_t len)
{
    if (ib__utf8_valid(p, len) && memchr(p, '\0', len) == NULL) {
        fprintf(out, "%s (text, %zu bytes): ", label, len);
        put_text(out, (const char *)p, len, "\n\t");
        fputc('\n', out);
        return;
    }
    fprintf(out, "%s (hex, %zu bytes): ", label, len);
    for (size_t i = 0; i < len; i++)
        fprintf(out, "%02x", p[i]);
    fputc('\n', out);
}

static void print_headers(FILE *out, natsMsg *m)
{
    const char **keys = NULL;
    int nkeys = 0;
    if (natsMsgHeader_Keys(m, &keys, &nkeys) != NATS_OK)
        return;
    for (int i = 0; i < nkeys; i++) {
        const char **values = NULL;
        int nvalues = 0;
        if (natsMsgHeader_Values(m, keys[i], &values, &nvalues) != NATS_OK)
            continue;
        for (int j = 0; j < nvalues; j++) {
            fputs("  ", out);
            put_str(out, keys[i]);
            fputs(": ", out);
            put_str(out, values[j]);
            fputc('\n', out);
        }
        free((void *)values);
    }
    free((void *)keys);
}

void ib_dlq_print_show(FILE *out, const ib_dlq_entry *e)
{
    char t[40];
    const uint8_t *data = (const uint8_t *)natsMsg_GetData(e->msg);
    size_t len = (size_t)natsMsg_GetDataLength(e->msg);
    fprintf(out, "dead letter %" PRIu64 " at %s on %s\nheaders:\n", e->seq,
            ib_dlq_format_time(t, sizeof(t), e->time_ms), natsMsg_GetSubject(e->msg));
    print_headers(out, e->msg);

    ib_event *ev = NULL;
    ib_error err = {0};
    ib_event_limits lim = {.id_flags = IB_ID_ANY_VERSION};
    if (ib_event_decode(&ev, NULL, data, len, &lim, &err) != IB_OK) {
        fprintf(out, "event: does not decode (%s)\n", err.msg);
        print_bytes(out, "bytes", data, len);
        return;
    }
    fprintf(out, "event:\n  id: %s\n  type: %s\n  source: ", ev->id, ev->type);
    put_str(out, or_dash(ev->source));
    fputc('\n', out);
    if (ev->created_at_ms != 0)
        fprintf(out, "  created_at: %s\n", ib_dlq_format_time(t, sizeof(t), ev->created_at_ms));
    for (size_t i = 0; i < ev->header_count; i++) {
        fputs("  header ", out);
        put_str(out, ev->headers[i].key);
        fputs(": ", out);
        put_str(out, ev->headers[i].value);
        fputc('\n', out);
    }
    print_bytes(out, "  payload", ev->payload != NULL ? ev->payload : (const uint8_t *)"",
                ev->payload_len);
    ib_event_free(ev);
}
