/* SPDX-License-Identifier: Apache-2.0 */
/* Error detail that travels beside an ib_status.
 *
 * The ib_error struct and ib_error_clear() are public
 * (<infinity_bus/status.h>); filling one is internal.
 *
 * Parameter order, the rule the code follows (nats.c's):
 *   - a function that creates an object takes the new object's out
 *     pointer first: ib_recorder_open(&r, uri, options, err);
 *   - otherwise the object the function acts on (the receiver) comes
 *     first: ib_recorder_is_processed(r, &processed, consumer, id, err);
 *   - output parameters come next, before the inputs;
 *   - an optional `ib_error *err` is always the last parameter.
 * Functions that fail fill `err` (when non-NULL) with a message that names
 * the thing and the reason, e.g. "recorder sqlite:/x.db: database is
 * locked". Messages never contain event payloads. */
#ifndef IB_ERROR_H
#define IB_ERROR_H

#include "status.h"

/* Fills `err` (if non-NULL) with `status` and a printf-style message and
 * returns `status`, so callers can write `return ib_error_set(err, ...)`. */
ib_status ib_error_set(ib_error *err, ib_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
