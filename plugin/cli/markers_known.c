/* ibus markers: whether --consumer names an identity the recorder knows
 * (markers_known.h). */
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
    if (ib_recorder_list(r, NULL, 0, collect, &k, &e) != IB_OK)
        goto fail;
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
