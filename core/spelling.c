/* SPDX-License-Identifier: Apache-2.0 */
/* Edit distance for "did you mean" hints (spelling.h). */
#include "spelling.h"

#include <strings.h>

size_t ib_spelling_distance(const char *a, size_t an, const char *b, size_t bn, bool fold)
{
    size_t row[64];
    if (an >= 64 || bn >= 64)
        return IB_SPELLING_FAR;
    for (size_t j = 0; j <= bn; j++)
        row[j] = j;
    for (size_t i = 1; i <= an; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= bn; j++) {
            size_t up = row[j];
            bool differ = fold ? strncasecmp(a + i - 1, b + j - 1, 1) != 0 : a[i - 1] != b[j - 1];
            size_t best = diag + differ;
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[bn];
}
