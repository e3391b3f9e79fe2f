/* SPDX-License-Identifier: Apache-2.0 */
/* The claims this recorder holds, in memory: for each (consumer, event id,
 * owner) it acquired, the epoch it wrote last, the attempt count and the
 * lease end. With them a renewal, a release and a mark write without
 * reading first: the next epoch is known, and a mark made well inside the
 * lease needs no fence (nobody takes a claim over before its lease ends).
 * Only ever a shortcut: a key missing here is read from the bucket as
 * before, so the table may forget anything (it is cleared when it grows
 * past KV_HELD_MAX, which only a caller that never marks nor releases can
 * make it do). */
#include "kv_held.h"

#include <stdlib.h>
#include <string.h>

#define KV_HELD_BUCKETS 1024u
#define KV_HELD_MAX 65536u

struct kv_held {
    kv_held *next;
    uint64_t hash;
    kv_lease claim;
    char names[]; /* consumer '\0' id '\0' owner '\0' */
};

/* FNV-1a over the three names with their terminators. */
static uint64_t hash_names(const ib_marker_key *key, const char *owner, size_t *len)
{
    const char *parts[3] = {key->consumer, key->event_id, owner};
    uint64_t h = 1469598103934665603ull;
    *len = 0;
    for (int p = 0; p < 3; p++) {
        size_t n = strlen(parts[p]) + 1;
        for (size_t i = 0; i < n; i++)
            h = (h ^ (unsigned char)parts[p][i]) * 1099511628211ull;
        *len += n;
    }
    return h;
}

static bool same_names(const kv_held *e, const ib_marker_key *key, const char *owner)
{
    const char *p = e->names;
    if (strcmp(p, key->consumer) != 0)
        return false;
    p += strlen(p) + 1;
    if (strcmp(p, key->event_id) != 0)
        return false;
    p += strlen(p) + 1;
    return strcmp(p, owner) == 0;
}

/* The link that points at the entry of (key, owner), or at the NULL that
 * ends its bucket. Called with held_mu taken. */
static kv_held **find(kv_recorder *k, const ib_marker_key *key, const char *owner, uint64_t *hash,
                      size_t *len)
{
    *hash = hash_names(key, owner, len);
    kv_held **link = &k->held[*hash % KV_HELD_BUCKETS];
    while (*link != NULL && ((*link)->hash != *hash || !same_names(*link, key, owner)))
        link = &(*link)->next;
    return link;
}

static void clear_locked(kv_recorder *k)
{
    for (size_t b = 0; k->held != NULL && b < KV_HELD_BUCKETS; b++) {
        while (k->held[b] != NULL) {
            kv_held *e = k->held[b];
            k->held[b] = e->next;
            free(e);
        }
    }
    k->held_n = 0;
}

bool ib__kv_held_init(kv_recorder *k)
{
    k->held = calloc(KV_HELD_BUCKETS, sizeof(*k->held));
    if (k->held == NULL)
        return false;
    pthread_mutex_init(&k->held_mu, NULL);
    return true;
}

void ib__kv_held_free(kv_recorder *k)
{
    if (k->held == NULL)
        return;
    clear_locked(k);
    free(k->held);
    k->held = NULL;
    pthread_mutex_destroy(&k->held_mu);
}

void ib__kv_held_put(kv_recorder *k, const ib_marker_key *key, const char *owner, const kv_lease *c,
                     bool add)
{
    uint64_t hash;
    size_t len;
    pthread_mutex_lock(&k->held_mu);
    kv_held **link = find(k, key, owner, &hash, &len);
    if (*link != NULL) {
        (*link)->claim = *c;
    } else if (add) {
        if (k->held_n >= KV_HELD_MAX)
            clear_locked(k);
        kv_held *e = malloc(sizeof(*e) + len);
        if (e != NULL) {
            /* The bucket again: clearing may have emptied it. */
            link = &k->held[hash % KV_HELD_BUCKETS];
            *e = (kv_held){.next = *link, .hash = hash, .claim = *c};
            char *p = e->names;
            const char *parts[3] = {key->consumer, key->event_id, owner};
            for (int i = 0; i < 3; i++) {
                size_t n = strlen(parts[i]) + 1;
                memcpy(p, parts[i], n);
                p += n;
            }
            *link = e;
            k->held_n++;
        }
    }
    pthread_mutex_unlock(&k->held_mu);
}

bool ib__kv_held_get(kv_recorder *k, const ib_marker_key *key, const char *owner, kv_lease *out)
{
    uint64_t hash;
    size_t len;
    pthread_mutex_lock(&k->held_mu);
    kv_held **link = find(k, key, owner, &hash, &len);
    bool found = *link != NULL;
    if (found)
        *out = (*link)->claim;
    pthread_mutex_unlock(&k->held_mu);
    return found;
}

void ib__kv_held_drop(kv_recorder *k, const ib_marker_key *key, const char *owner)
{
    uint64_t hash;
    size_t len;
    pthread_mutex_lock(&k->held_mu);
    kv_held **link = find(k, key, owner, &hash, &len);
    if (*link != NULL) {
        kv_held *e = *link;
        *link = e->next;
        free(e);
        k->held_n--;
    }
    pthread_mutex_unlock(&k->held_mu);
}
