/* SPDX-License-Identifier: Apache-2.0 */
/* A finding of ibus status appended to its report (status.h): one
 * function, used by the plain checks and the partitioned ones alike. */
#include <stdarg.h>
#include <stdio.h>

#include "status.h"

void ib_status_finding_add(ib_status_report *r, const char *code, const char *fix, const char *fmt,
                           ...)
{
    if (r->nfindings == IB_STATUS_FINDINGS_MAX)
        return;
    ib_status_finding *f = &r->findings[r->nfindings++];
    f->code = code;
    snprintf(f->fix, sizeof(f->fix), "%s", fix != NULL ? fix : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof(f->message), fmt, ap);
    va_end(ap);
}
