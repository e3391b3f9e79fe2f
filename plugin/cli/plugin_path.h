/* SPDX-License-Identifier: Apache-2.0 */
/* ibus run --plugin: a name without a '/' is a plugin of the plugin
 * directory (the install's lib/infinity-bus/plugins, or --plugin-dir).
 * Private to the CLI. */
#ifndef IB_CLI_PLUGIN_PATH_H
#define IB_CLI_PLUGIN_PATH_H

#include <stddef.h>

/* The plugin directory of this install: <prefix>/<libdir>/infinity-bus/
 * plugins found from the ibus executable's own place (so a prefix that was
 * moved, or given to `cmake --install --prefix`, still works), else the
 * directory configured at build time. Writes it into `out` (cap bytes) and
 * returns it. */
const char *ib_cli_plugin_dir(char *out, size_t cap);

/* Resolves one --plugin value into `out` (cap bytes): a value with a '/'
 * is a path and is kept; any other is a name, NAME or NAME.so, looked up
 * as <dir>/NAME.so. Returns 0, or -1 with the reason in `why` (whycap
 * bytes), naming the directory and, when a file of that name is in the
 * current directory, how to load that one instead. */
int ib_cli_plugin_resolve(char *out, size_t cap, const char *value, const char *dir, char *why,
                          size_t whycap);

#endif
