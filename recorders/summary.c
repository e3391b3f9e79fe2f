/* SPDX-License-Identifier: Apache-2.0 */
/* Per-consumer summaries (recorder.h, ib__recorder_summarize): the list the
 * kinds fill, and what they count in it. */
#include "recorder_internal.h"

#include <stdlib.h>
#include <string.h>

ib__consumer_summary *ib__summary_entry(ib__summary_list *l, const char *consumer, size_t len)
{
    if (l->last < l->n && strncmp(l->v[l->last].consumer, consumer, len) == 0 &&
        l->v[l->last].consumer[len] == '\0')
        return &l->v[l->last];
    for (size_t i = 0; i < l->n; i++)
        if (strncmp(l->v[i].consumer, consumer, len) == 0 && l->v[i].consumer[len] == '\0')
            return &l->v[l->last = i];
    if (l->n == l->cap) {
        size_t cap = l->cap == 0 ? 8 : 2 * l->cap;
        ib__consumer_summary *grown = realloc(l->v, cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        l->v = grown;
        l->cap = cap;
    }
    char *name = strndup(consumer, len);
    if (name == NULL)
        return NULL;
    ib__consumer_summary *s = &l->v[l->n];
    memset(s, 0, sizeof(*s));
    s->consumer = name;
    l->last = l->n++;
    return s;
}

void ib__summary_marker(ib__consumer_summary *s, int64_t ts_ms)
{
    if (s->markers == 0 || ts_ms < s->oldest_ms)
        s->oldest_ms = ts_ms;
    if (s->markers == 0 || ts_ms > s->newest_ms)
        s->newest_ms = ts_ms;
    s->markers++;
}

void ib__summary_claim(ib__consumer_summary *s, int64_t left_ms, const char *owner)
{
    if (s->claims == 0 || left_ms < s->lease_left_min_ms) {
        s->lease_left_min_ms = left_ms;
        size_t len = strnlen(owner, IB_OWNER_MAX);
        memcpy(s->lease_left_min_owner, owner, len);
        s->lease_left_min_owner[len] = '\0';
    }
    s->claims++;
    s->claims_ended += left_ms <= 0;
}

void ib__summary_attempts(ib__consumer_summary *s, uint32_t attempts, uint32_t max_attempts)
{
    s->attempted++;
    s->exhausted += attempts >= max_attempts;
}

void ib__summary_take(ib__summary_list *l, ib__consumer_summary **out, size_t *n)
{
    *out = l->n > 0 ? l->v : NULL;
    *n = l->n;
    if (l->n == 0)
        free(l->v);
    memset(l, 0, sizeof(*l));
}

void ib__consumer_summaries_free(ib__consumer_summary *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++)
        free(v[i].consumer);
    free(v);
}
