/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: partition subjects as a partition's owner reads them
 * (core/partition.c, ib_partition_subject_read).
 *
 * The first byte picks N (1..256), the rest (cut at the first NUL, as a
 * subject would be) is the subject under the base "orders.p". What is in
 * place must be exactly what ib_partition_subject writes for its key;
 * what is misplaced must name two different partitions below N. */
#include <stdlib.h>
#include <string.h>

#include "partition.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char subject[512], again[512];
    if (size < 1)
        return 0;
    uint32_t n = (uint32_t)data[0] + 1;
    size_t len = size - 1 < sizeof(subject) - 1 ? size - 1 : sizeof(subject) - 1;
    memcpy(subject, data + 1, len);
    subject[len] = '\0';
    uint32_t p = UINT32_MAX, b = UINT32_MAX;
    ib_partition_place place = ib_partition_subject_read(subject, "orders.p", n, &p, &b);
    if (place == IB_PARTITION_NOT_OURS) {
        if (p != UINT32_MAX || b != UINT32_MAX)
            abort();
        return 0;
    }
    if (p >= n || b >= n || (place == IB_PARTITION_IN_PLACE) != (p == b))
        abort();
    const char *key = strchr(subject + strlen("orders.p."), '.');
    if (key == NULL)
        abort();
    ib_error e;
    if (ib_partition_subject(again, sizeof(again), "orders.p", key + 1, n, &e) != IB_OK)
        abort();
    if (place == IB_PARTITION_IN_PLACE && strcmp(again, subject) != 0)
        abort();
    return 0;
}
