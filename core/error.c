/* SPDX-License-Identifier: Apache-2.0 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

ib_status ib_error_set(ib_error *err, ib_status status, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->status = status;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return status;
}

void ib_error_clear(ib_error *err)
{
    if (err != NULL) {
        err->status = IB_OK;
        err->msg[0] = '\0';
    }
}
