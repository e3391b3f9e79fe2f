/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the CLI duration parser (plugin/cli/options.c). Any bytes:
 * no crash; on success the value is non-negative and parsing is stable. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t a = -1, b = -1;
    if (ib_parse_duration_ms(&a, s) == 0) {
        assert(a >= 0);
        assert(ib_parse_duration_ms(&b, s) == 0 && a == b);
    }
    free(s);
    return 0;
}
