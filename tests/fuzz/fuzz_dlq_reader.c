/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the dead-letter reader of ibus dlq (plugin/cli/dlq_read.c,
 * dlq_target.c, dlq_print.c) with forged headers. Anyone allowed to publish
 * to a dead-letter subject writes these headers, so whatever they hold:
 * the reader never keeps a value with a control byte, never reads a
 * number that is not one, the target precheck never lets through a $ or
 * _INBOX subject, a wildcard, a space or a stream name that is not one,
 * and every printer survives the entry.
 *
 * Input: header lines "Key: Value" ('\n'-separated; the first ':' splits),
 * then an empty line and the message's bytes. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlq.h"
#include "jetstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool clean(const char *s)
{
    return s == NULL || ib_nats_control_at(s) < 0;
}

/* Adds the header lines of text[0..len) (NUL-terminated at len) to m. */
static void add_headers(natsMsg *m, char *text, size_t len)
{
    for (size_t at = 0; at < len;) {
        char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl != NULL ? (size_t)(nl - text) : len;
        text[end] = '\0';
        char *colon = strchr(text + at, ':');
        if (colon != NULL && colon > text + at) {
            *colon = '\0';
            const char *v = colon + 1;
            while (*v == ' ')
                v++;
            natsMsgHeader_Add(m, text + at, v);
        }
        at = end + 1;
    }
}

static void check_entry(const ib_dlq_entry *e)
{
    assert(clean(e->reason) && clean(e->error) && clean(e->subject) && clean(e->stream));
    assert(clean(e->consumer) && clean(e->event_id) && clean(e->event_type));
    assert(memchr(e->invalid, '\0', sizeof(e->invalid)) != NULL);
    char why[512];
    memset(why, 'x', sizeof(why));
    if (ib_dlq_target_precheck(e, why, sizeof(why)) == 0) {
        assert(e->invalid[0] == '\0');
        assert(ib_nats_subject_problem(e->subject, IB_SUBJECT_NOT_SYSTEM) == NULL);
        assert(e->subject[0] != '$' && strncmp(e->subject, "_INBOX", 6) != 0);
        assert(strchr(e->subject, ' ') == NULL);
        assert(ib_nats_name_problem(e->stream) == NULL);
    } else {
        assert(memchr(why, '\0', sizeof(why)) != NULL && why[0] != '\0');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    /* nats.c's messages need the library opened (its garbage collector) */
    if (sink == NULL && (nats_Open(-1) != NATS_OK || (sink = fopen("/dev/null", "w")) == NULL))
        return 0;
    char *text = malloc(size + 1);
    natsMsg *m = NULL;
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* the headers end at the first empty line; the rest is the body */
    char *blank = strstr(text, "\n\n");
    size_t hlen = blank != NULL ? (size_t)(blank - text) : size;
    size_t body = blank != NULL ? hlen + 2 : size;
    if (natsMsg_Create(&m, "ibus.dlq.fuzz", NULL, (const char *)data + body, (int)(size - body)) ==
        NATS_OK) {
        text[hlen] = '\0';
        add_headers(m, text, hlen);
        ib_dlq_entry e;
        ib_dlq_entry_read(&e, m); /* takes m over */
        m = NULL;
        check_entry(&e);
        ib_dlq_filter f = {.reason = e.reason, .consumer = e.consumer, .type = e.event_type};
        (void)ib_dlq_filter_match(&f, &e);
        ib_dlq_print_row(sink, &e);
        ib_dlq_print_json(sink, &e);
        ib_dlq_print_show(sink, &e);
        ib_dlq_entry_clear(&e);
    }
    natsMsg_Destroy(m);
    free(text);
    return 0;
}
