/* SPDX-License-Identifier: Apache-2.0 */
#include "status.h"

const char *ib_status_str(ib_status status)
{
    static const char *const names[IB_STATUS_COUNT] = {
        [IB_OK] = "ok",
        [IB_ERR_INVALID_ARG] = "invalid argument",
        [IB_ERR_NOMEM] = "out of memory",
        [IB_ERR_IO] = "i/o error",
        [IB_ERR_DECODE] = "decode",
        [IB_ERR_INVALID_ID] = "invalid-id",
        [IB_ERR_TOO_LARGE] = "too large",
        [IB_ERR_CONFIG] = "configuration",
        [IB_ERR_RECORDER] = "recorder",
        [IB_ERR_BUSY] = "busy",
        [IB_ERR_PLUGIN] = "plugin",
        [IB_ERR_NATS] = "nats",
        [IB_ERR_TIMEOUT] = "timeout",
        [IB_ERR_UNSUPPORTED] = "unsupported",
        [IB_ERR_CLOSED] = "closed",
        [IB_ERR_SCHEMA] = "schema",
        [IB_ERR_REFUSED] = "refused",
    };
    if ((unsigned)status >= IB_STATUS_COUNT || names[status] == 0)
        return "unknown";
    return names[status];
}
