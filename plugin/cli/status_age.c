/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: ages for people (status.h), shared by the checks and both
 * printers. */
#include "status.h"

#include <inttypes.h>

const char *ib_status_age(char *buf, size_t cap, int64_t ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    if (ms < 1000) {
        snprintf(buf, cap, "%" PRId64 "ms", ms > 0 ? ms : 0);
        return buf;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms < units[i].ms)
            continue;
        int64_t rest = i + 1 < sizeof(units) / sizeof(units[0]) ? ms % units[i].ms : 0;
        if (i + 1 < sizeof(units) / sizeof(units[0]) && rest >= units[i + 1].ms)
            snprintf(buf, cap, "%" PRId64 "%s%" PRId64 "%s", ms / units[i].ms, units[i].unit,
                     rest / units[i + 1].ms, units[i + 1].unit);
        else
            snprintf(buf, cap, "%" PRId64 "%s", ms / units[i].ms, units[i].unit);
        return buf;
    }
    return buf;
}
