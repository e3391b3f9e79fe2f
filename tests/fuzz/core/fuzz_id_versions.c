/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: ib_id_versions_parse (ibus run --uuid-versions) on
 * arbitrary bytes. No crash; an accepted set is not empty, holds only
 * versions 1..8 unless it is "any", prints back to text that parses to the
 * same set, and parsing is stable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "uuid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    unsigned set = 0, again = 0;
    if (ib_id_versions_parse(&set, text) == 0) {
        char printed[64];
        FUZZ_CHECK(set != 0);
        FUZZ_CHECK(set == IB_ID_ANY_VERSION || (set & ~0x1feu) == 0);
        FUZZ_CHECK(ib_id_versions_parse(&again, text) == 0 && again == set);
        ib_id_versions_str(printed, sizeof(printed), set);
        FUZZ_CHECK(ib_id_versions_parse(&again, printed) == 0 && again == set);
    } else {
        FUZZ_CHECK(set == 0);
    }
    free(text);
    return 0;
}
