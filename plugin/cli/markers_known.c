/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers: whether --consumer names an identity the recorder knows
 * (markers_known.h). Identities are compared whole: "bulk/once/chrage" is
 * not "bulk/once/charge", and "bulk/once" is neither. */
#include "markers_known.h"

#include <stdio.h>
#include <stdint.h>
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

/* The `index`-th '/'-separated part of `s`; its length in *len. */
static const char *part_at(const char *s, size_t index, size_t *len)
{
    for (size_t i = 0; i < index && strchr(s, '/') != NULL; i++)
        s = strchr(s, '/') + 1;
    *len = part_len(s);
    return s;
}

/* Edits (insert, delete, change, swap two neighbours) from a to b, the
 * first 63 bytes of each: how far a typo is from a name. */
static size_t typo_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t d[64][64];
    la = la > 63 ? 63 : la;
    lb = lb > 63 ? 63 : lb;
    for (size_t i = 0; i <= la; i++)
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            size_t v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
            v = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* Writes a hint naming the known identity nearest to `wanted`: one that
 * `wanted` is the beginning of, else, of those that differ from it in a
 * single part, the one whose part is the fewest typos away (whatever
 * order the recorder listed them in). Writes "" when none is that near. */
static void nearest_hint(char *out, size_t cap, const char *wanted, const known *k)
{
    size_t best = SIZE_MAX;
    out[0] = '\0';
    for (size_t i = 0; i < k->count; i++) {
        size_t differ, first, lw, ln;
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
        if (differ != 1 || parts != theirs)
            continue;
        const char *w = part_at(wanted, first, &lw), *n = part_at(k->names[i], first, &ln);
        size_t dist = typo_distance(w, lw, n, ln);
        if (dist < best) {
            best = dist;
            snprintf(out, cap, "; did you mean %s? (its %s part differs)", k->names[i],
                     part_name(first, parts));
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

/* The identities with markers, from the recorder's summaries (a few rows
 * of sqlite:, in name order); *found when `consumer` is one. IB_ERR_UNSUPPORTED
 * for a kind without summaries. */
static ib_status summarized(known *k, bool *found, ib_recorder *r, const char *consumer,
                            ib_error *e)
{
    ib__consumer_summary *all = NULL;
    size_t n = 0;
    ib_status st = ib__recorder_summarize(r, &all, &n, 1, e);
    for (size_t i = 0; st == IB_OK && i < n; i++) {
        if (all[i].markers == 0)
            continue;
        *found = *found || strcmp(all[i].consumer, consumer) == 0;
        ib_marker_info m = {.consumer = all[i].consumer};
        collect(k, &m);
    }
    ib__consumer_summaries_free(all, n);
    return st;
}

int ib_cli_markers_identity_check(ib_recorder *r, const char *uri, const char *action,
                                  const char *consumer, const char *event_id)
{
    bool found = false;
    ib_error e;
    static known k;
    memset(&k, 0, sizeof(k));
    ib_status st = summarized(&k, &found, r, consumer, &e);
    if (st == IB_ERR_UNSUPPORTED) {
        memset(&k, 0, sizeof(k));
        if (ib_recorder_list(r, consumer, 1, count_one, &found, &e) != IB_OK)
            goto fail;
        /* Only on the error path: a walk over every marker. */
        if (!found && ib_recorder_list(r, NULL, 0, collect, &k, &e) != IB_OK)
            goto fail;
    } else if (st != IB_OK) {
        goto fail;
    }
    if (found || key_has_state(r, consumer, event_id))
        return 0;
    print_unknown(uri, action, consumer, &k);
    return 2;
fail:
    fprintf(stderr, "ibus markers %s: %s\n", action, e.msg);
    return e.status == IB_ERR_UNSUPPORTED || e.status == IB_ERR_CONFIG ? 2 : 1;
}
