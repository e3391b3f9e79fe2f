/* SPDX-License-Identifier: Apache-2.0 */
/* The names of the dead-letter reasons (dead_letter.h), spelled once. */
#include "dead_letter.h"

static const char *const names[IB_DLQ_REASON_COUNT] = {
    [IB_DLQ_DECODE] = "decode",           [IB_DLQ_INVALID_ID] = "invalid-id",
    [IB_DLQ_MAX_DELIVER] = "max-deliver", [IB_DLQ_REJECTED] = "rejected",
    [IB_DLQ_CONFLICT] = "conflict",       [IB_DLQ_OTHER] = "other",
};

const char *ib_dead_letter_reason_str(ib_dead_letter_reason reason)
{
    if ((unsigned)reason >= IB_DLQ_REASON_COUNT)
        return names[IB_DLQ_OTHER];
    return names[reason];
}
