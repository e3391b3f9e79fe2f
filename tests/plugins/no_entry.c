/* SPDX-License-Identifier: Apache-2.0 */
/* A well-formed shared object that is not a plugin: it exports a function,
 * but not ib_plugin_entry. */
#include <stdint.h>

__attribute__((visibility("default"))) int plugin_entry(void);

int plugin_entry(void)
{
    return 42;
}
