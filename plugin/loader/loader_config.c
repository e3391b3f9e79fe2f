/* SPDX-License-Identifier: Apache-2.0 */
/* Where a plugin's configuration string comes from (loader.h). */
#include "loader.h"

#include <stdlib.h>
#include <string.h>

#include "spelling.h"

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

/* The name of `names` nearest to `given` (compared as their variables when
 * `as_env`): within two edits, one for names of up to four bytes; NULL
 * when none is that near. */
static const char *nearest(const char *given, size_t len, bool as_env, const char *const *names,
                           size_t count)
{
    const char *best = NULL;
    size_t best_d = len - (as_env ? sizeof(ENV_PREFIX) - 1 : 0) <= 4 ? 2 : 3;
    for (size_t i = 0; i < count; i++) {
        char env[sizeof(ENV_PREFIX) + IB_PLUGIN_NAME_MAX];
        const char *want = names[i];
        size_t skip = 0; /* variables differ only after their common prefix */
        if (as_env && ib_plugin_config_env_name(env, sizeof(env), names[i])) {
            want = env;
            skip = sizeof(ENV_PREFIX) - 1;
        }
        size_t d =
            ib_spelling_distance(given + skip, len - skip, want + skip, strlen(want) - skip, true);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}

/* Whether the NAME of `pair` (len bytes) is one of `names`, or, for an
 * environment entry, the variable of one of them. */
static bool names_loaded(const char *pair, size_t len, bool as_env, const char *const *names,
                         size_t count)
{
    for (size_t i = 0; i < count; i++) {
        char env[sizeof(ENV_PREFIX) + IB_PLUGIN_NAME_MAX];
        const char *want = names[i];
        if (as_env && !ib_plugin_config_env_name(env, sizeof(env), names[i]))
            continue;
        want = as_env ? env : want;
        if (strlen(want) == len && memcmp(want, pair, len) == 0)
            return true;
    }
    return false;
}

bool ib_plugin_config_find_stray(ib_plugin_config_stray *out, const char *const *cli_pairs,
                                 char *const *env, const char *const *names, size_t count)
{
    const size_t pl = sizeof(ENV_PREFIX) - 1;
    for (size_t i = 0; cli_pairs != NULL && cli_pairs[i] != NULL; i++) {
        const char *eq = strchr(cli_pairs[i], '=');
        /* no NAME: ib_plugin_config_lookup says what is wrong with it */
        if (eq == NULL || eq == cli_pairs[i])
            continue;
        size_t len = (size_t)(eq - cli_pairs[i]);
        if (names_loaded(cli_pairs[i], len, false, names, count))
            continue;
        *out = (ib_plugin_config_stray){cli_pairs[i], len, false,
                                        nearest(cli_pairs[i], len, false, names, count)};
        return true;
    }
    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        const char *eq = strchr(env[i], '=');
        if (strncmp(env[i], ENV_PREFIX, pl) != 0 || eq == NULL || (size_t)(eq - env[i]) == pl)
            continue;
        size_t len = (size_t)(eq - env[i]);
        if (names_loaded(env[i], len, true, names, count))
            continue;
        *out =
            (ib_plugin_config_stray){env[i], len, true, nearest(env[i], len, true, names, count)};
        return true;
    }
    return false;
}
