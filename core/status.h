/* Status codes shared by every part of infinity-bus.
 *
 * One enum for the whole project. Values are part of the log and CLI output
 * contract: each is numbered in a comment and never renumbered; new codes are
 * appended before IB_STATUS_COUNT. */
#ifndef IB_STATUS_H
#define IB_STATUS_H

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
    IB_STATUS_COUNT
} ib_status;

/* Returns a static, human-readable name for a status ("ok", "decode", ...).
 * Never NULL; unknown values give "unknown". */
const char *ib_status_str(ib_status status);

#endif
