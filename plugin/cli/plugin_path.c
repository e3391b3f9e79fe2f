/* SPDX-License-Identifier: Apache-2.0 */
/* ibus run --plugin NAME: the plugin directory and the lookup in it
 * (plugin_path.h). */
#include "plugin_path.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ib_cli_plugin_dir(char *out, size_t cap)
{
    char exe[4096];
    struct stat st;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (slash != NULL) {
        *slash = '\0';
        /* IB_PLUGIN_DIR_FROM_BIN: the plugin directory relative to bindir */
        snprintf(out, cap, "%s/%s", exe, IB_PLUGIN_DIR_FROM_BIN);
        if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
            return out;
    }
    snprintf(out, cap, "%s", IB_PLUGIN_DIR);
    return out;
}

int ib_cli_plugin_resolve(char *out, size_t cap, const char *value, const char *dir, char *why,
                          size_t whycap)
{
    struct stat st;
    if (strchr(value, '/') != NULL) {
        snprintf(out, cap, "%s", value);
        return 0;
    }
    size_t len = strlen(value);
    bool has_so = len > 3 && strcmp(value + len - 3, ".so") == 0;
    if (len == 0 || (has_so && len == 3)) {
        snprintf(why, whycap, "--plugin: expected a path or a plugin name, got '%s'", value);
        return -1;
    }
    snprintf(out, cap, "%s/%s%s", dir, value, has_so ? "" : ".so");
    if (stat(out, &st) == 0)
        return 0;
    char here[300];
    snprintf(here, sizeof(here), "%s%s", value, has_so ? "" : ".so");
    bool in_cwd = stat(here, &st) == 0;
    snprintf(why, whycap,
             "--plugin %s: no %s in the plugin directory %s (name a plugin elsewhere by its "
             "path%s%s%s, or set --plugin-dir)",
             value, here, dir, in_cwd ? ": ./" : ", e.g. ./", here, in_cwd ? " is here" : "");
    return -1;
}
