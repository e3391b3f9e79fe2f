/* Error detail that travels beside an ib_status.
 *
 * Convention for the whole project: output parameters come first, and an
 * optional `ib_error *err` is always the last parameter. Functions that fail
 * fill it (when non-NULL) with a message that names the thing and the reason,
 * e.g. "recorder sqlite:/x.db: database is locked". Messages never contain
 * event payloads. */
#ifndef IB_ERROR_H
#define IB_ERROR_H

#include "status.h"

#define IB_ERROR_MSG_MAX 256

typedef struct ib_error {
    ib_status status;
    char msg[IB_ERROR_MSG_MAX];
} ib_error;

/* Fills `err` (if non-NULL) with `status` and a printf-style message and
 * returns `status`, so callers can write `return ib_error_set(err, ...)`. */
ib_status ib_error_set(ib_error *err, ib_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears `err` (if non-NULL) to IB_OK and an empty message. */
void ib_error_clear(ib_error *err);

#endif
