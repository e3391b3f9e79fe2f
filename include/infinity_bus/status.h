/* SPDX-License-Identifier: Apache-2.0 */
/* Status codes and error detail of libinfinity-bus (installed).
 *
 * One enum for the whole project, the library and `ibus` alike. Values are
 * part of the log and CLI output contract: each is numbered in a comment and
 * never renumbered; new codes are appended before IB_STATUS_COUNT.
 *
 * A function that can fail returns an ib_status and takes an optional
 * `ib_error *err` as its last parameter; on failure it fills `err` (when
 * non-NULL) with the same status and a message that names the thing and
 * the reason, e.g. "recorder sqlite:/x.db: database is locked". Messages
 * never contain event payloads. */
#ifndef INFINITY_BUS_STATUS_H
#define INFINITY_BUS_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ib_status {
    IB_OK = 0,               /* 0: success */
    IB_ERR_INVALID_ARG = 1,  /* 1: a caller passed a bad argument */
    IB_ERR_NOMEM = 2,        /* 2: allocation failed or a memory budget was hit */
    IB_ERR_IO = 3,           /* 3: a file or socket operation failed */
    IB_ERR_DECODE = 4,       /* 4: bytes are not a valid protobuf Event */
    IB_ERR_INVALID_ID = 5,   /* 5: event id missing or not an accepted UUID */
    IB_ERR_TOO_LARGE = 6,    /* 6: input exceeds a configured size bound */
    IB_ERR_CONFIG = 7,       /* 7: bad configuration (option, URI, file) */
    IB_ERR_RECORDER = 8,     /* 8: the recorder's storage failed */
    IB_ERR_BUSY = 9,         /* 9: a lock or lease is held elsewhere */
    IB_ERR_PLUGIN = 10,      /* 10: a plugin could not be loaded or refused */
    IB_ERR_NATS = 11,        /* 11: the NATS client or server reported a failure */
    IB_ERR_TIMEOUT = 12,     /* 12: an operation did not finish in time */
    IB_ERR_UNSUPPORTED = 13, /* 13: the operation is not offered by this kind */
    IB_ERR_CLOSED = 14,      /* 14: the object was closed or is shutting down */
    IB_ERR_SCHEMA = 15,      /* 15: a database schema is newer than this build */
    IB_ERR_REFUSED = 16,     /* 16: the server refused the request as asked (a conflicting
                                    configuration, no permission): asking again cannot help */
    IB_STATUS_COUNT
} ib_status;

/* Returns a static, human-readable name for a status ("ok", "decode", ...).
 * Never NULL; unknown values give "unknown". */
const char *ib_status_str(ib_status status);

#define IB_ERROR_MSG_MAX 256

/* Error detail beside an ib_status; the caller owns it (usually on the
 * stack) and may pass the same one to several calls. */
typedef struct ib_error {
    ib_status status;
    char msg[IB_ERROR_MSG_MAX];
} ib_error;

/* Clears `err` (if non-NULL) to IB_OK and an empty message. */
void ib_error_clear(ib_error *err);

#ifdef __cplusplus
}
#endif

#endif
