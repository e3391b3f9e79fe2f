/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the values of a partitioned consumer's bucket that other
 * tools can write (recorders/partition_lease.c, recorders/fleet_members.c).
 *
 * Any bytes go through the lease value parser and the announcement
 * parser. What either accepts must be what ibus would have written: an
 * owner of printable bytes without space, a time of digits; written back
 * in the documented form, it must give the same bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_members.h"
#include "partition_lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_token(const char *t)
{
    size_t n = strlen(t);
    if (n == 0)
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char again[512];
    ib_lease_state s;
    if (ib__lease_value_parse(&s, (const char *)data, size)) {
        check_token(s.owner);
        int n = snprintf(again, sizeof(again), "ibus-lease v1 %s %" PRId64, s.owner, s.end_ms);
        /* leading zeros are the one other spelling the parser takes */
        if (n < 0 || (size_t)n > size)
            abort();
    }
    char token[IB_FLEET_MEMBER_MAX + 1];
    if (size < 1024) {
        int64_t at = ib__fleet_announcement_parse((const char *)data, (int)size, token);
        if (at >= 0) {
            check_token(token);
            if (strpbrk(token, ".*>") != NULL)
                abort();
            int n = snprintf(again, sizeof(again), "ibus-member v1 %" PRId64 " %s", at, token);
            if (n < 0 || (size_t)n > size)
                abort();
        }
    }
    return 0;
}
