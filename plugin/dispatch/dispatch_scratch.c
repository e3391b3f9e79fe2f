/* SPDX-License-Identifier: Apache-2.0 */
/* The buffers a batch run reuses from one batch to the next, so the hot
 * path does not allocate (dispatch_run_state.h). */
#include <stdlib.h>

#include "dispatch_run_state.h"

static size_t grown(size_t cap, size_t need)
{
    size_t c = cap != 0 ? cap : 64;
    while (c < need)
        c *= 2;
    return c;
}

/* Replaces each buffer of a group by a bigger one, or none of them. */
static bool regrow(void **bufs[], const size_t sizes[], size_t count, size_t cap)
{
    void *fresh[20];
    for (size_t i = 0; i < count; i++) {
        fresh[i] = malloc(cap * sizes[i]);
        if (fresh[i] == NULL) {
            while (i-- > 0)
                free(fresh[i]);
            return false;
        }
    }
    for (size_t i = 0; i < count; i++) {
        free(*bufs[i]);
        *bufs[i] = fresh[i];
    }
    return true;
}

bool ib__run_scratch_reserve(run_scratch *s, size_t n, size_t total)
{
    if (n + 1 > s->dcap) {
        size_t cap = grown(s->dcap, n + 1);
        void **bufs[] = {(void **)&s->first, (void **)&s->lists, (void **)&s->settled,
                         (void **)&s->fps};
        const size_t sizes[] = {sizeof(*s->first), sizeof(*s->lists), sizeof(*s->settled),
                                sizeof(*s->fps)};
        if (!regrow(bufs, sizes, 4, cap))
            return false;
        s->dcap = cap;
    }
    if (total > s->icap) {
        size_t cap = grown(s->icap, total);
        void **bufs[] = {(void **)&s->items,      (void **)&s->keys,       (void **)&s->key_items,
                         (void **)&s->infos,      (void **)&s->flags,      (void **)&s->work,
                         (void **)&s->lease_keys, (void **)&s->lease_live, (void **)&s->pend_keys,
                         (void **)&s->pend_items, (void **)&s->key_fps,    (void **)&s->pend_fps,
                         (void **)&s->txn_out,    (void **)&s->started,    (void **)&s->renew_keys,
                         (void **)&s->renew_held, (void **)&s->renew_work};
        const size_t sizes[] = {
            sizeof(run_item),       sizeof(*s->keys),       sizeof(*s->key_items),
            sizeof(*s->infos),      sizeof(*s->flags),      sizeof(*s->work),
            sizeof(*s->lease_keys), sizeof(*s->lease_live), sizeof(*s->pend_keys),
            sizeof(*s->pend_items), sizeof(*s->key_fps),    sizeof(*s->pend_fps),
            sizeof(*s->txn_out),    sizeof(*s->started),    sizeof(*s->renew_keys),
            sizeof(*s->renew_held), sizeof(*s->renew_work)};
        if (!regrow(bufs, sizes, 17, cap))
            return false;
        s->icap = cap;
    }
    /* At most half full, so probes stay short. */
    if (total * 2 > s->seen_cap) {
        size_t cap = grown(s->seen_cap, total * 2);
        void **bufs[] = {(void **)&s->seen};
        const size_t sizes[] = {sizeof(*s->seen)};
        if (!regrow(bufs, sizes, 1, cap))
            return false;
        s->seen_cap = cap;
    }
    return true;
}

void ib__run_scratch_free(run_scratch *s)
{
    free(s->first);
    free(s->lists);
    free(s->settled);
    free(s->fps);
    free(s->items);
    free(s->keys);
    free(s->key_items);
    free(s->infos);
    free(s->flags);
    free(s->work);
    free(s->lease_keys);
    free(s->lease_live);
    free(s->pend_keys);
    free(s->pend_items);
    free(s->key_fps);
    free(s->pend_fps);
    free(s->txn_out);
    free((void *)s->started);
    free(s->renew_keys);
    free(s->renew_held);
    free(s->renew_work);
    free(s->seen);
    memset(s, 0, sizeof(*s));
}
