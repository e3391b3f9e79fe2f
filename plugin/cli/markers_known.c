/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers: whether --consumer names an identity the recorder knows
 * (markers_known.h). Identities are compared whole: "bulk/once/chrage" is
 * not "bulk/once/charge", and "bulk/once" is neither. */
#include "markers_known.h"

#include <stdio.h>
#include <string.h>

/* Distinct identities seen while listing, up to KNOWN_MAX named. */
#define KNOWN_MAX 16

typedef struct known {
    char names[KNOWN_MAX][IB_CONSUMER_MAX + 1];
    size_t count;
    bool more; /* more identities than KNOWN_MAX */
} known;

static int count_one(void *ctx, const ib_marker_info *m)
{
    (void)m;
    *(bool *)ctx = true;
    return 1; /* one is enough */
}

static int collect(void *ctx, const ib_marker_info *m)
{
    known *k = ctx;
    for (size_t i = 0; i < k->count; i++)
        if (strcmp(k->names[i], m->consumer) == 0)
            return 0;
    if (k->count == KNOWN_MAX) {
        k->more = true;
        return 0;
    }
    snprintf(k->names[k->count++], sizeof(k->names[0]), "%s", m->consumer);
    return 0;
}

/* Length of the '/'-separated part that starts at `s`. */
static size_t part_len(const char *s)
{
    const char *slash = strchr(s, '/');
    return slash != NULL ? (size_t)(slash - s) : strlen(s);
}

/* Compares identities `a` and `b` part by part. Returns the number of
 * parts of `a` and stores in *differ how many of them differ from `b`'s,
 * in *first the index of the first that does, and in *prefix whether `a`
 * is `b`'s first parts and `b` has more. */
static size_t compare_parts(const char *a, const char *b, size_t *differ, size_t *first,
                            bool *prefix)
{
    size_t n = 0;
    *differ = 0;
    *first = 0;
    for (;; n++) {
        size_t la = part_len(a), lb = b != NULL ? part_len(b) : 0;
        if ((b == NULL || la != lb || memcmp(a, b, la) != 0) && (*differ)++ == 0)
            *first = n;
        b = b == NULL || b[lb] != '/' ? NULL : b + lb + 1;
        if (a[la] != '/')
            break;
        a += la + 1;
    }
    *prefix = *differ == 0 && b != NULL;
    return n + 1;
}

static const char *part_name(size_t index, size_t parts)
{
    static const char *const three[] = {"durable", "plugin", "handler"};
    return parts == 3 && index < 3 ? three[index] : "one";
}

/* Writes a hint naming the known identity nearest to `wanted`: one that
 * differs in a single part, or one that `wanted` is the beginning of.
 * Writes "" when none is that near. */
static void nearest_hint(char *out, size_t cap, const char *wanted, const known *k)
{
    out[0] = '\0';
    for (size_t i = 0; i < k->count; i++) {
        size_t differ, first;
        bool prefix;
        size_t parts = compare_parts(wanted, k->names[i], &differ, &first, &prefix);
        size_t theirs = 1;
        for (const char *c = k->names[i]; *c != '\0'; c++)
            theirs += *c == '/';
        if (prefix) {
            snprintf(out, cap, "; %s is only the first %zu parts of %s", wanted, parts,
                     k->names[i]);
            return;
        }
        if (differ == 1 && parts == theirs) {
            snprintf(out, cap, "; did you mean %s? (its %s part differs)", k->names[i],
                     part_name(first, parts));
            return;
        }
    }
}

/* Whether the key (consumer, event_id) itself has a claim or attempts:
 * a handler that never marked anything is still known by them. */
static bool key_has_state(ib_recorder *r, const char *consumer, const char *event_id)
{
    ib_marker_state s;
    ib_error e;
    if (event_id == NULL || ib_recorder_inspect(r, &s, consumer, event_id, &e) != IB_OK)
        return false;
    return s.marked || s.owner[0] != '\0' || s.attempts > 0;
}

/* Prints why `consumer` is refused, with what the recorder knows. */
static void print_unknown(const char *uri, const char *action, const char *consumer, const known *k)
{
    char list[KNOWN_MAX * (IB_CONSUMER_MAX + 2)] = "";
    size_t used = 0;
    for (size_t i = 0; i < k->count && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i > 0 ? ", " : "",
                                 k->names[i]);
    char hint[2 * IB_CONSUMER_MAX + 80];
    nearest_hint(hint, sizeof(hint), consumer, k);
    fprintf(stderr,
            "ibus markers %s: --consumer %s: %s has no markers of that identity; it knows %s%s%s. "
            "Identities match exactly, part by part: give the full <durable>/<plugin>/<handler> "
            "identity, as 'plugin loaded' logs it (a handler that has not yet marked an event has "
            "no markers)\n",
            action, consumer, uri, k->count > 0 ? list : "none", k->more ? ", ..." : "", hint);
}

int ib_cli_markers_identity_check(ib_recorder *r, const char *uri, const char *action,
                                  const char *consumer, const char *event_id)
{
    bool found = false;
    ib_error e;
    if (ib_recorder_list(r, consumer, 1, count_one, &found, &e) != IB_OK)
        goto fail;
    if (found || key_has_state(r, consumer, event_id))
        return 0;
    /* Only on this error path: a walk over every marker. */
    static known k;
    memset(&k, 0, sizeof(k));
    if (ib_recorder_list(r, NULL, 0, collect, &k, &e) != IB_OK)
        goto fail;
    print_unknown(uri, action, consumer, &k);
    return 2;
fail:
    fprintf(stderr, "ibus markers %s: %s\n", action, e.msg);
    return e.status == IB_ERR_UNSUPPORTED || e.status == IB_ERR_CONFIG ? 2 : 1;
}
