/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status --partitions: a partitioned consumer read from the server
 * (status.h): each partition's lease from the bucket, the live members,
 * each partition's durable. Reads only: no lease is taken, nothing is
 * announced. */
#include "status.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_members.h"
#include "host.h"
#include "partition_lease.h"

/* The live members, or why they cannot be read in p->error. */
static int read_members(ib_status_partitions *p, jsCtx *js, int64_t now_ms)
{
    ib_fleet_list *l = malloc(sizeof(*l));
    ib_error e = {0};
    if (l == NULL)
        return -1;
    if (ib_fleet_members(js, p->bucket, now_ms, p->lease_ms, l, &e) != IB_OK) {
        snprintf(p->error, sizeof(p->error), "the members in bucket %.200s cannot be read: %.250s",
                 p->bucket, e.msg);
        free(l);
        return 0;
    }
    p->members = calloc(l->count > 0 ? l->count : 1, sizeof(*p->members));
    if (p->members == NULL) {
        free(l);
        return -1;
    }
    for (size_t i = 0; i < l->count; i++)
        snprintf(p->members[i], sizeof(p->members[i]), "%s", l->at[i]);
    p->nmembers = l->count;
    p->members_stale = l->stale;
    p->members_foreign = l->foreign;
    free(l);
    return 0;
}

static bool is_member(const ib_status_partitions *p, const char *token)
{
    for (size_t i = 0; i < p->nmembers; i++)
        if (strcmp(p->members[i], token) == 0)
            return true;
    return false;
}

/* Each partition's newest lease epoch. A value that is not a lease is
 * the partition's (lease_bad); a read that fails is said once. */
static void read_leases(ib_status_partitions *p, jsCtx *js)
{
    for (uint32_t i = 0; i < p->n; i++) {
        ib_status_partition *x = &p->v[i];
        ib_lease_state st;
        ib_error e = {0};
        memset(&st, 0, sizeof(st));
        ib_status s = ib_partition_lease_read(js, p->bucket, i, &st, &e);
        if (s == IB_ERR_RECORDER) {
            x->lease_bad = true;
            continue;
        }
        if (s != IB_OK) {
            if (p->error[0] == '\0')
                snprintf(p->error, sizeof(p->error),
                         "the lease of partition %" PRIu32 " cannot be read: %.400s", i, e.msg);
            continue;
        }
        x->epoch = st.epoch;
        snprintf(x->owner, sizeof(x->owner), "%s", st.owner);
        x->end_ms = st.end_ms;
        x->owner_live = x->owner[0] != '\0' && is_member(p, x->owner);
    }
}

/* Each partition's durable, from one listing of the stream's consumers. */
static void read_durables(ib_status_partitions *p, jsCtx *js, const char *stream)
{
    jsConsumerInfoList *list = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_Consumers(&list, js, stream, NULL, &jerr);
    if (s == NATS_NOT_FOUND)
        return; /* no consumer at all */
    if (s != NATS_OK) {
        if (p->error[0] == '\0')
            snprintf(p->error, sizeof(p->error), "the consumers of stream %s cannot be listed: %s",
                     stream, natsStatus_GetText(s));
        return;
    }
    for (int i = 0; i < list->Count; i++) {
        const char *name = list->List[i]->Name != NULL ? list->List[i]->Name : "";
        int64_t k = ib_status_partition_of_durable(name, p->durable, p->n);
        if (k < 0)
            continue;
        ib_status_consumer c;
        ib_status_consumer_from(&c, list->List[i]);
        ib_status_partition *x = &p->v[k];
        x->durable_exists = true;
        x->pending = c.pending;
        x->ack_pending = c.ack_pending;
        snprintf(x->filter, sizeof(x->filter), "%s", c.filter);
    }
    jsConsumerInfoList_Destroy(list);
}

int ib_status_read_partitions(ib_status_partitions *p, jsCtx *js, const char *stream,
                              int64_t now_ms)
{
    ib_host_partition_names names;
    ib_host_partition_names_make(&names, p->durable);
    snprintf(p->bucket, sizeof(p->bucket), "%s", names.bucket);
    snprintf(p->log_stream, sizeof(p->log_stream), "%s", names.log_stream);
    if ((p->v = calloc(p->n, sizeof(*p->v))) == NULL)
        return -1;
    char kv_stream[sizeof(names.bucket) + 3], why[256];
    ib_status_stream b;
    snprintf(kv_stream, sizeof(kv_stream), "KV_%s", p->bucket);
    if (ib_status_read_stream(&b, js, kv_stream, why, sizeof(why)) != 0) {
        snprintf(p->error, sizeof(p->error), "bucket %.200s: %.250s", p->bucket, why);
    } else if ((p->bucket_exists = b.exists)) {
        if (read_members(p, js, now_ms) != 0)
            return -1;
        read_leases(p, js);
    }
    read_durables(p, js, stream);
    return 0;
}
