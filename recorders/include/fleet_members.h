/* SPDX-License-Identifier: Apache-2.0 */
/* The live processes of a partitioned consumer (issue 47, item 3): each
 * announces itself in the consumer's key-value bucket, and every process
 * reads the same list, from which rendezvous hashing (core/rendezvous.h)
 * gives every partition's owner.
 *
 * A process writes one key of its own, "m.<owner token in hex>" (a key
 * takes no '@'), with the value "ibus-member v1 <unix ms> <owner token>"
 * (Put: nobody else writes it), again every
 * third of its lease, and deletes it when it leaves. A member is live
 * while its last announcement is younger than the lease: a process that
 * was killed drops out of every list one lease after its last write. The
 * list is read through an ordered consumer on "m.*" that delivers the
 * last message of each key, so the lease keys beside it cost nothing.
 * A value that is not an announcement, or whose token is not its key's
 * (another tool's), is left out and counted. The bucket is BORROWED; one thread at a time. */
#ifndef IB_FLEET_MEMBERS_H
#define IB_FLEET_MEMBERS_H

#include <nats/nats.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define IB_FLEET_MEMBER_MAX 128 /* bytes of an owner token */
#define IB_FLEET_MEMBERS_MAX 1024

/* Announces `owner` (printable, no space or '.', '*', '>') as live at
 * `now_ms`. Errors: IB_ERR_INVALID_ARG for such an owner, IB_ERR_NATS. */
ib_status ib_fleet_announce(kvStore *kv, const char *owner, int64_t now_ms, ib_error *err);

/* Takes `owner` out of the list at once (a process that leaves in
 * order). Errors: IB_ERR_NATS. */
ib_status ib_fleet_leave(kvStore *kv, const char *owner, ib_error *err);

/* The live members: their tokens, in the order the bucket lists them. */
typedef struct ib_fleet_list {
    char names[IB_FLEET_MEMBERS_MAX][IB_FLEET_MEMBER_MAX + 1];
    const char *at[IB_FLEET_MEMBERS_MAX];
    size_t count;
    size_t stale;   /* announcements older than the lease, left out */
    size_t foreign; /* values that are not announcements, left out */
} ib_fleet_list;

/* Reads the members of the bucket `bucket` announced within `lease_ms`
 * of `now_ms` into *out. Errors: IB_ERR_NATS (the list cannot be read);
 * IB_ERR_RECORDER when more than IB_FLEET_MEMBERS_MAX are live. */
ib_status ib_fleet_members(jsCtx *js, const char *bucket, int64_t now_ms, int64_t lease_ms,
                           ib_fleet_list *out, ib_error *err);

/* Reads an announcement, "ibus-member v1 <unix ms> <token>", of `len`
 * bytes: returns the time and writes the token into `token`
 * (IB_FLEET_MEMBER_MAX + 1 bytes); -1 when the bytes are anything else.
 * For the list above and the fuzz target. */
int64_t ib__fleet_announcement_parse(const char *v, int len, char *token);

#endif
