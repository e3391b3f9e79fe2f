/* SPDX-License-Identifier: Apache-2.0 */
/* The layouts store_layouts compares, in the order of its tables; each one's
 * file says how it works (store_layouts.h). */
#include <string.h>

#include "store_layouts.h"

const ib__sl_layout *const ib__sl_layouts[] = {
    &ib__sl_bare,         &ib__sl_plain,   &ib__sl_compact,
    &ib__sl_compact_blob, &ib__sl_journal, &ib__sl_generations,
};
const size_t ib__sl_nlayouts = sizeof(ib__sl_layouts) / sizeof(ib__sl_layouts[0]);

const ib__sl_layout *ib__sl_layout_named(const char *name)
{
    for (size_t i = 0; i < ib__sl_nlayouts; i++)
        if (strcmp(ib__sl_layouts[i]->name, name) == 0)
            return ib__sl_layouts[i];
    return NULL;
}
