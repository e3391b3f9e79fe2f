/* SPDX-License-Identifier: Apache-2.0 */
/* ib__recorder_summarize (recorder.h): the arguments checked, the kind's
 * op called, the result sorted. */
#include "recorder_internal.h"

#include <stdlib.h>
#include <string.h>

static int cmp_summary(const void *a, const void *b)
{
    return strcmp(((const ib__consumer_summary *)a)->consumer,
                  ((const ib__consumer_summary *)b)->consumer);
}

ib_status ib__recorder_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                                 uint32_t max_attempts, ib_error *err)
{
    if (r == NULL || out == NULL || n == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: recorder or output is NULL");
    *out = NULL;
    *n = 0;
    if (max_attempts == 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: max_attempts must be above 0");
    ib_status st;
    if (IB__HAS_OP(r, summarize))
        st = r->ops->summarize(r, out, n, max_attempts, err);
    else
        return ib_error_set(err, IB_ERR_UNSUPPORTED, "recorder %s: summaries are not supported",
                            r->ops->kind);
    if (st != IB_OK) {
        ib__consumer_summaries_free(*out, *n);
        *out = NULL;
        *n = 0;
        return st;
    }
    if (*n > 1)
        qsort(*out, *n, sizeof(**out), cmp_summary);
    return IB_OK;
}
