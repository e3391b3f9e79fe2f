/* ibus markers: whether --consumer names an identity the recorder knows
 * (markers_known.h). */
#include "markers_known.h"

#include <stdio.h>
#include <string.h>

/* Distinct identities seen while listing, up to KNOWN_MAX named. */
#define KNOWN_MAX 16

typedef struct known {
    const char *wanted; /* the --consumer asked about */
    size_t family;      /* its length up to the last '/' (0: none) */
    bool sibling;       /* a marker of another handler of its <durable>/<plugin> */
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
    if (k->family > 0 && strncmp(m->consumer, k->wanted, k->family) == 0 &&
        m->consumer[k->family] == '/')
        k->sibling = true;
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

int ib_cli_markers_identity_check(ib_recorder *r, const char *uri, const char *action,
                                  const char *consumer)
{
    bool found = false;
    ib_error e;
    if (ib_recorder_list(r, consumer, 1, count_one, &found, &e) != IB_OK)
        goto fail;
    if (found)
        return 0;
    /* Only on this error path: a walk over every marker. */
    static known k;
    memset(&k, 0, sizeof(k));
    k.wanted = consumer;
    const char *slash = strrchr(consumer, '/');
    k.family = slash != NULL ? (size_t)(slash - consumer) : 0;
    if (ib_recorder_list(r, NULL, 0, collect, &k, &e) != IB_OK)
        goto fail;
    /* An empty file, or another handler of the same plugin with markers
     * (one that only ever rejected has none): a plausible identity. */
    if (k.count == 0 || k.sibling)
        return 0;
    char list[KNOWN_MAX * 80] = "";
    size_t used = 0;
    for (size_t i = 0; i < k.count && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i > 0 ? ", " : "",
                                 k.names[i]);
    fprintf(stderr,
            "ibus markers %s: --consumer %s: %s has no markers of that identity; it knows %s%s "
            "(give the full <durable>/<plugin>/<handler> identity, as 'plugin loaded' logs it)\n",
            action, consumer, uri, k.count > 0 ? list : "none", k.more ? ", ..." : "");
    return 2;
fail:
    fprintf(stderr, "ibus markers %s: %s\n", action, e.msg);
    return e.status == IB_ERR_UNSUPPORTED || e.status == IB_ERR_CONFIG ? 2 : 1;
}
