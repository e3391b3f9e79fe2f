/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status --partitions: what needs attention in a partitioned
 * consumer (status.h). Its finding codes, beside status_check.c's:
 *
 *   partition-without-owner  messages wait in partitions that no live
 *                            process holds (a killed owner whose lease
 *                            ran out, a fleet that is down)
 *   lease-unreadable         a partition's newest lease epoch is not a
 *                            lease (another tool wrote it): no process
 *                            takes that partition
 *   partition-not-started    partitions whose durable was never made: no
 *                            ibus run --partitions took them yet
 *   partition-filter         a partition's durable filters another subject
 *                            than <--subject>.<P>.*
 *   partitions-unreadable    the members or the leases cannot be read */
#include "status.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *ib_status_partition_owner(const ib_status_partition *p, int64_t now_ms)
{
    if (p->lease_bad || p->epoch == 0 || p->owner[0] == '\0' || p->end_ms <= now_ms)
        return NULL;
    return p->owner;
}

uint64_t ib_status_partition_lag(const ib_status_partition *p)
{
    return p->pending + (p->ack_pending > 0 ? (uint64_t)p->ack_pending : 0);
}

int64_t ib_status_partition_of_durable(const char *name, const char *durable, uint32_t n)
{
    size_t dl = strlen(durable);
    if (strncmp(name, durable, dl) != 0 || strncmp(name + dl, "_p", 2) != 0)
        return -1;
    const char *d = name + dl + 2;
    if (d[0] < '0' || d[0] > '9' || (d[0] == '0' && d[1] != '\0'))
        return -1;
    int64_t v = 0;
    for (; *d != '\0'; d++) {
        if (*d < '0' || *d > '9' || v >= (int64_t)n)
            return -1;
        v = v * 10 + (*d - '0');
    }
    return v < (int64_t)n ? v : -1;
}

void ib_status_partitions_free(ib_status_partitions *p)
{
    free(p->v);
    free(p->members);
    p->v = NULL;
    p->members = NULL;
    p->nmembers = 0;
}

/* A list of partitions for a sentence: "3, 5 and 9", the first few and
 * "and 12 more" past them. */
typedef struct part_list {
    char text[200];
    size_t count;
} part_list;

static void part_list_add(part_list *l, uint32_t p)
{
    size_t used = strlen(l->text);
    if (l->count++ < 12)
        snprintf(l->text + used, sizeof(l->text) - used, "%s%" PRIu32, used > 0 ? ", " : "", p);
}

static const char *part_list_end(part_list *l)
{
    size_t used = strlen(l->text);
    if (l->count > 12)
        snprintf(l->text + used, sizeof(l->text) - used, " and %zu more", l->count - 12);
    return l->text;
}

static void check_owners(ib_status_report *r)
{
    const ib_status_partitions *ps = r->parts;
    part_list orphans = {0}, bad = {0}, unmade = {0}, filters = {0};
    uint64_t waiting = 0;
    char want[IB_STATUS_NAME_MAX + 32];
    for (uint32_t p = 0; p < ps->n; p++) {
        const ib_status_partition *x = &ps->v[p];
        if (x->lease_bad)
            part_list_add(&bad, p);
        if (!x->durable_exists) {
            part_list_add(&unmade, p);
            continue;
        }
        snprintf(want, sizeof(want), "%s.%" PRIu32 ".*", ps->subject, p);
        if (ps->subject[0] != '\0' && strcmp(x->filter, want) != 0)
            part_list_add(&filters, p);
        uint64_t lag = ib_status_partition_lag(x);
        bool live = ib_status_partition_owner(x, r->now_ms) != NULL && x->owner_live;
        if (lag > 0 && !live) {
            part_list_add(&orphans, p);
            waiting += lag;
        }
    }
    if (orphans.count > 0)
        ib_status_finding_add(
            r, "partition-without-owner", NULL,
            "partitions %s of %s have no live owner and %" PRIu64
            " messages wait in them: no live ibus run --partitions holds their lease (a "
            "process that died gives its partitions up once its lease ends, and a live one "
            "takes them at its next tick); start one with --durable %s --partitions %" PRIu32,
            part_list_end(&orphans), ps->durable, waiting, ps->durable, ps->n);
    if (bad.count > 0)
        ib_status_finding_add(
            r, "lease-unreadable", NULL,
            "the newest lease epoch of partitions %s in bucket %s is not a lease (another tool "
            "wrote it): no process takes those partitions until it is deleted",
            part_list_end(&bad), ps->bucket);
    if (unmade.count > 0)
        ib_status_finding_add(
            r, "partition-not-started", NULL,
            "partitions %s of %s have no durable (%s_p<P>): no ibus run --partitions %" PRIu32
            " has taken them yet, so nothing of theirs is pulled",
            part_list_end(&unmade), ps->durable, ps->durable, ps->n);
    if (filters.count > 0)
        ib_status_finding_add(
            r, "partition-filter", "--subject",
            "the durables of partitions %s of %s filter another subject than "
            "%s.<P>.*: --subject is not the base the ibus run processes use, or the durables "
            "were made for another one",
            part_list_end(&filters), ps->durable, ps->subject);
}

void ib_status_check_partitions(ib_status_report *r)
{
    if (r->parts->error[0] != '\0')
        ib_status_finding_add(r, "partitions-unreadable", NULL, "%s", r->parts->error);
    check_owners(r);
}
