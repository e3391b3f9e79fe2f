/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status --partitions: a partitioned consumer's partitions and
 * members as text and as JSON (status.h). status_print.c and
 * status_json.c put them where a plain durable's consumer and markers
 * go. */
#include "status.h"

#include <inttypes.h>
#include <string.h>

#include <jansson.h>

#include "dlq.h"
#include "host.h"

/* A lease in one word or two: held, ended, given back, never leased, not
 * a lease. */
static const char *lease_state(const ib_status_partition *x, int64_t now_ms)
{
    if (x->lease_bad)
        return "not a lease";
    if (x->epoch == 0)
        return "never leased";
    if (x->end_ms == 0)
        return "given back";
    return x->end_ms > now_ms ? "held" : "ended";
}

static uint64_t total_lag(const ib_status_partitions *ps)
{
    uint64_t lag = 0;
    for (uint32_t p = 0; p < ps->n; p++)
        lag += ib_status_partition_lag(&ps->v[p]);
    return lag;
}

/* The lease column: "ends in 12s", "ended 3s ago", or its state. */
static const char *lease_text(char *buf, size_t cap, const ib_status_partition *x, int64_t now)
{
    char a[48];
    const char *st = lease_state(x, now);
    if (strcmp(st, "held") == 0)
        snprintf(buf, cap, "ends in %s", ib_status_age(a, sizeof(a), x->end_ms - now));
    else if (strcmp(st, "ended") == 0)
        snprintf(buf, cap, "ended %s ago", ib_status_age(a, sizeof(a), now - x->end_ms));
    else
        snprintf(buf, cap, "%s", st);
    return buf;
}

static void print_members(FILE *out, const ib_status_partitions *ps)
{
    char d[48];
    fprintf(out, "  fleet         %zu live members (lease %s)", ps->nmembers,
            ib_host_duration_str(d, sizeof(d), ps->lease_ms));
    if (ps->members_stale > 0 || ps->members_foreign > 0)
        fprintf(out, "; left out: %zu stale, %zu not announcements", ps->members_stale,
                ps->members_foreign);
    if (!ps->bucket_exists)
        fprintf(out, "; bucket %s does not exist: no process ran yet", ps->bucket);
    fputc('\n', out);
    for (size_t i = 0; i < ps->nmembers; i++)
        fprintf(out, "                %s\n", ps->members[i]); /* tokens are long */
}

void ib_status_print_partitions_text(FILE *out, const ib_status_report *r)
{
    const ib_status_partitions *ps = r->parts;
    char lease[64], who[160];
    print_members(out, ps);
    fprintf(out, "  partitions    %" PRIu32 " of %s, bucket %s, marker log %s; lag %" PRIu64 "\n",
            ps->n, ps->subject[0] != '\0' ? ps->subject : "(--subject not given)", ps->bucket,
            ps->log_stream, total_lag(ps));
    /* the owner last: a member token is about 90 bytes */
    fprintf(out, "    %-5s %-16s %10s %12s  %s\n", "P", "lease", "pending", "ack pending", "owner");
    for (uint32_t p = 0; p < ps->n; p++) {
        const ib_status_partition *x = &ps->v[p];
        const char *owner = ib_status_partition_owner(x, r->now_ms);
        if (owner == NULL)
            snprintf(who, sizeof(who), "none");
        else
            snprintf(who, sizeof(who), "%s%s", owner, x->owner_live ? "" : " (not live)");
        lease_text(lease, sizeof(lease), x, r->now_ms);
        if (x->durable_exists)
            fprintf(out, "    %-5" PRIu32 " %-16s %10" PRIu64 " %12" PRId64 "  %s\n", p, lease,
                    x->pending, x->ack_pending, who);
        else
            fprintf(out, "    %-5" PRIu32 " %-16s %23s  %s\n", p, lease, "no durable yet", who);
    }
}

static json_t *str_or_null(const char *s)
{
    json_t *j = s != NULL ? json_string(s) : NULL;
    return j != NULL ? j : json_null();
}

static json_t *num(int64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *partition_json(const ib_status_report *r, uint32_t p)
{
    const ib_status_partitions *ps = r->parts;
    const ib_status_partition *x = &ps->v[p];
    char durable[IB_STATUS_NAME_MAX + 16], t[40];
    ib_host_partition_durable(durable, sizeof(durable), ps->durable, p);
    const char *owner = ib_status_partition_owner(x, r->now_ms);
    json_t *o = json_pack(
        "{s:i,s:o,s:o,s:b,s:o,s:o,s:o,s:o}", "partition", (json_int_t)p, "owner",
        str_or_null(owner), "lease_owner", str_or_null(x->owner[0] != '\0' ? x->owner : NULL),
        "owner_live", owner != NULL && x->owner_live, "lease",
        str_or_null(lease_state(x, r->now_ms)), "lease_epoch", num((int64_t)x->epoch),
        "lease_end_time",
        x->end_ms > 0 ? str_or_null(ib_dlq_format_time(t, sizeof(t), x->end_ms)) : json_null(),
        "lease_left_ms", owner != NULL ? num(x->end_ms - r->now_ms) : json_null());
    json_t *more =
        json_pack("{s:o,s:b,s:o,s:o,s:o,s:o}", "durable", str_or_null(durable), "durable_exists",
                  x->durable_exists, "filter", str_or_null(x->durable_exists ? x->filter : NULL),
                  "pending", num((int64_t)x->pending), "ack_pending", num(x->ack_pending), "lag",
                  num((int64_t)ib_status_partition_lag(x)));
    if (o != NULL && more != NULL)
        json_object_update(o, more);
    json_decref(more);
    return o;
}

json_t *ib_status_partitions_json(const ib_status_report *r)
{
    const ib_status_partitions *ps = r->parts;
    json_t *members = json_array(), *parts = json_array();
    for (size_t i = 0; members != NULL && i < ps->nmembers; i++)
        json_array_append_new(members, str_or_null(ps->members[i]));
    for (uint32_t p = 0; parts != NULL && p < ps->n; p++)
        json_array_append_new(parts, partition_json(r, p));
    json_t *o = json_pack("{s:o,s:o,s:i,s:o,s:o,s:b,s:o,s:o}", "durable", str_or_null(ps->durable),
                          "subject", str_or_null(ps->subject[0] != '\0' ? ps->subject : NULL), "n",
                          (json_int_t)ps->n, "lease_ms", num(ps->lease_ms), "bucket",
                          str_or_null(ps->bucket), "bucket_exists", ps->bucket_exists, "marker_log",
                          str_or_null(ps->log_stream), "error",
                          str_or_null(ps->error[0] != '\0' ? ps->error : NULL));
    json_t *more =
        json_pack("{s:o,s:o,s:o,s:o,s:o}", "members", members != NULL ? members : json_null(),
                  "members_stale", num((int64_t)ps->members_stale), "members_foreign",
                  num((int64_t)ps->members_foreign), "lag", num((int64_t)total_lag(ps)),
                  "partitions", parts != NULL ? parts : json_null());
    if (o != NULL && more != NULL)
        json_object_update(o, more);
    json_decref(more);
    return o;
}
