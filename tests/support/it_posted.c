/* SPDX-License-Identifier: Apache-2.0 */
/* See it_posted.h. */
#include "it_posted.h"

#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "it_js.h"

typedef struct posted_key {
    const char *id;
    size_t index;
} posted_key;

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const posted_key *)a)->id, ((const posted_key *)b)->id);
}

/* The expected index of the event one message carries, -1 when it is not
 * expected, -2 when the message is bad. */
static long match(const it_msg *m, const posted_key *keys, size_t n, char *const *prefixes)
{
    ib_event *ev = NULL;
    ib_error err;
    if (ib_event_decode(&ev, NULL, m->data, m->len, NULL, &err) != IB_OK)
        return -2;
    const char *msg_id = it_msg_header(m, "Nats-Msg-Id");
    posted_key want = {ev->id, 0};
    const posted_key *k = bsearch(&want, keys, n, sizeof(*keys), cmp_key);
    long at = k != NULL ? (long)k->index : -1;
    if (msg_id == NULL || strcmp(msg_id, ev->id) != 0)
        at = -2;
    if (at >= 0 && prefixes != NULL) {
        size_t pl = strlen(prefixes[at]);
        if (ev->payload_len < pl || memcmp(ev->payload, prefixes[at], pl) != 0)
            at = -2;
    }
    ib_event_free(ev);
    return at;
}

bool it_posted_tally(it_posted *out, it_server *s, const char *stream, char *const *ids,
                     char *const *prefixes, size_t n)
{
    posted_key *keys = calloc(n + 1, sizeof(*keys));
    unsigned *seen = calloc(n + 1, sizeof(*seen));
    it_msg *msgs = NULL;
    memset(out, 0, sizeof(*out));
    if (keys == NULL || seen == NULL) {
        free(keys);
        free(seen);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (posted_key){ids[i], i};
    qsort(keys, n, sizeof(*keys), cmp_key);
    out->messages = it_stream_read_all(&msgs, s, stream);
    for (size_t i = 0; i < out->messages; i++) {
        long at = match(&msgs[i], keys, n, prefixes);
        if (at == -2)
            out->bad++;
        else if (at < 0)
            out->unexpected++;
        else if (seen[at]++ > 0)
            out->duplicated++;
    }
    for (size_t i = 0; i < n; i++)
        out->missing += seen[i] == 0;
    it_msgs_free(msgs, out->messages);
    free(keys);
    free(seen);
    return true;
}
