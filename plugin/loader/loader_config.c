/* SPDX-License-Identifier: Apache-2.0 */
/* Where a plugin's configuration string comes from (loader.h). */
#include "loader.h"

#include <stdlib.h>
#include <string.h>

#define ENV_PREFIX "IB_PLUGIN_CONFIG_"

bool ib_plugin_config_env_name(char *out, size_t out_len, const char *name)
{
    size_t pl = sizeof(ENV_PREFIX) - 1, nl = strlen(name);

    if (out_len <= pl + nl)
        return false;
    memcpy(out, ENV_PREFIX, pl);
    /* ASCII rules, not the locale's: the name must not depend on LANG. */
    for (size_t i = 0; i < nl; i++) {
        char c = name[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            c = '_';
        out[pl + i] = c;
    }
    out[pl + nl] = '\0';
    return true;
}

ib_status ib_plugin_config_lookup(char **out, const char *const *cli_pairs, const char *name,
                                  ib_error *err)
{
    const char *found = NULL;
    char env[sizeof(ENV_PREFIX) + IB_PLUGIN_NAME_MAX];

    *out = NULL;
    if (name == NULL || name[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin config: no plugin name");
    for (size_t i = 0; cli_pairs != NULL && cli_pairs[i] != NULL; i++) {
        const char *pair = cli_pairs[i];
        const char *eq = strchr(pair, '=');
        if (eq == NULL || eq == pair)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "plugin configuration \"%.60s\": expected NAME=STRING", pair);
        if ((size_t)(eq - pair) == strlen(name) && memcmp(pair, name, strlen(name)) == 0)
            found = eq + 1;
    }
    if (found == NULL && ib_plugin_config_env_name(env, sizeof(env), name))
        found = getenv(env);
    if (found == NULL)
        return IB_OK;
    *out = strdup(found);
    if (*out == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "plugin %s: out of memory for its config", name);
    return IB_OK;
}
