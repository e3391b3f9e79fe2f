/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin loader: opens handler plugins (infinity_bus/plugin.h), checks
 * them, initialises them and hands out their handlers. What the handlers
 * are called and where they run is the host's business (host.h), so the
 * loader knows nothing of dispatch.
 *
 * Lifecycle, as the host drives it:
 *
 *     ib_plugin_open()      trust check of the file, dlopen, descriptor checks
 *     ib_plugin_init()      the plugin's init() with the host API and config
 *     ib_plugin_handler()   the host registers every handler with dispatch
 *     ...                   dispatch runs handlers
 *     ib_dispatch_free()    the host stops dispatch first: no handler may run
 *     ib_plugin_close()     fini(), then dlclose
 *
 * A plugin is never unloaded while one of its handlers may run: the host
 * closes plugins only after dispatch has stopped and been freed, because
 * the dispatch table borrows the handlers' functions and state.
 *
 * Plugin configuration. Each plugin receives one configuration string,
 * found by the plugin's NAME (the descriptor's, not the file's):
 *   1. the last "NAME=STRING" pair naming it in the list the caller passes
 *      (ibus: its --plugin-config options), else
 *   2. the environment variable IB_PLUGIN_CONFIG_<NAME>, with NAME upper-cased
 *      and every byte other than [A-Z0-9] replaced by '_' (plugin "my-audit"
 *      reads IB_PLUGIN_CONFIG_MY_AUDIT), else
 *   3. "" (no configuration).
 * The string's syntax belongs to the plugin; the example plugins use
 * comma-separated key=value pairs ("file=/var/log/audit.log,mode=x").
 * ib_plugin_config_lookup() implements this lookup for the CLI.
 *
 * Thread safety: open/init/close run on the host's main thread
 * while it starts and stops; the accessors may be called from any thread. */
#ifndef IB_LOADER_H
#define IB_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "infinity_bus/plugin.h"

typedef struct ib_plugin ib_plugin;

typedef struct ib_plugin_open_options {
    /* Development only ("allow insecure plugin files"): skip the ownership and
     * permission checks of the plugin file and its directories. A path that is
     * missing or not a regular file is still refused. */
    bool allow_insecure_files;
} ib_plugin_open_options;

/* Loads the plugin at `path` and checks it, calling no plugin code except
 * ib_plugin_entry() (and, unavoidably, the library's ELF constructors):
 *   - the file: a regular file, owned by root or the running user, not
 *     writable by group or others, and every directory of its resolved
 *     path up to "/" passes the same test, a sticky one (/tmp) whatever
 *     its mode (unless opts->allow_insecure_files);
 *   - the file is opened once; the checks and dlopen go through that
 *     descriptor, so replacing the file after the checks changes nothing;
 *   - an ELF shared object that dlopen(RTLD_NOW | RTLD_LOCAL) accepts and
 *     that defines ib_plugin_entry;
 *   - the descriptor: magic, then size (at least IB_PLUGIN_DESC_SIZE_1_0),
 *     then ABI major (equal to the host's), handler stride, name and
 *     version, a non-empty handler list with well-formed, unique names,
 *     non-NULL handle functions, well-formed event type lists and no
 *     handler flag bits this host does not know.
 * A descriptor from an older minor is read up to its size (later fields are
 * absent); one from a newer minor is accepted and only the fields this host
 * knows are read. `opts` may be NULL (all checks on).
 *
 * On success `*out` owns the library; free it with ib_plugin_close(). On
 * failure the library is unloaded, `*out` is NULL and `err` says
 * "plugin <path>: <reason>" (IB_ERR_PLUGIN; IB_ERR_NOMEM when memory runs
 * out). */
ib_status ib_plugin_open(ib_plugin **out, const char *path, const ib_plugin_open_options *opts,
                         ib_error *err);

/* Runs the plugin's init() (if any) with the host API table `api`
 * (BORROWED; must outlive the plugin) and `config` (NULL means ""). Call
 * exactly once, before its handlers are registered. On failure returns IB_ERR_PLUGIN
 * with "plugin <path>: init failed: <the plugin's reason>"; the plugin stays
 * un-initialised (fini() will not run) and the caller closes it. After a
 * successful init() it checks the event types of the handlers flagged
 * IB_HANDLER_TYPES_AFTER_INIT (filled in by init()), as ib_plugin_open()
 * checks static ones: a bad list returns IB_ERR_PLUGIN with "plugin <path>:
 * handler "<name>" ... after init"; the plugin then counts as initialised
 * (fini() runs at close) but must not be registered: close it. */
ib_status ib_plugin_init(ib_plugin *p, const ib_host_api *api, const char *config, ib_error *err);

/* Calls fini() (if init succeeded), unloads the library and frees `p`.
 * Every pointer obtained from the plugin (names, handler descriptors) dies
 * with it. The caller guarantees that no handler of `p` runs or will run.
 * NULL is a no-op. */
void ib_plugin_close(ib_plugin *p);

/* Accessors. Strings are owned by the plugin and valid until
 * ib_plugin_close(). */
const char *ib_plugin_name(const ib_plugin *p);
const char *ib_plugin_version(const ib_plugin *p);
/* One-line description (ABI 1.1); "" when the plugin has none. */
const char *ib_plugin_description(const ib_plugin *p);
/* The path as given to ib_plugin_open(). */
const char *ib_plugin_path(const ib_plugin *p);
/* ABI version the plugin was built against. */
unsigned ib_plugin_abi_major(const ib_plugin *p);
unsigned ib_plugin_abi_minor(const ib_plugin *p);
size_t ib_plugin_handler_count(const ib_plugin *p);
/* Handler `i` (0-based) as this host reads it, or NULL past the end. */
const ib_handler_desc *ib_plugin_handler(const ib_plugin *p, size_t i);
/* Handler `i`'s IB_HANDLER_* flags (ABI 1.2): 0 for a plugin built before
 * 1.2, and 0 past the end. Only bits this host knows get this far: the
 * others are refused by ib_plugin_open(). */
uint32_t ib_plugin_handler_flags(const ib_plugin *p, size_t i);
/* Whether init() succeeded (or the plugin has none): only then may its
 * handlers run. */
bool ib_plugin_is_initialised(const ib_plugin *p);
/* What the plugin's init() returned, passed to every handler call; NULL
 * before init and for plugins without state. */
void *ib_plugin_state(const ib_plugin *p);

/* Finds the configuration string of plugin `name`: the value of the last
 * "NAME=STRING" entry of `cli_pairs` (NULL-terminated; may be NULL) whose
 * NAME equals `name`, else the environment variable
 * IB_PLUGIN_CONFIG_<NAME> (see the top of this file). Stores a copy in
 * `*out` (caller frees with free()), or NULL when neither gives one: not
 * found is an answer, and the caller passes "" to init. Errors:
 * IB_ERR_CONFIG for a cli entry without '=' or with an empty NAME,
 * IB_ERR_NOMEM. */
ib_status ib_plugin_config_lookup(char **out, const char *const *cli_pairs, const char *name,
                                  ib_error *err);

/* Writes into `out` (`out_len` bytes) the environment variable name that
 * carries the configuration of plugin `name`, e.g. "IB_PLUGIN_CONFIG_MY_AUDIT".
 * Returns false if it does not fit. */
bool ib_plugin_config_env_name(char *out, size_t out_len, const char *name);

/* A configuration given by plugin name that names no loaded plugin: a
 * misspelt name would otherwise leave that plugin unconfigured without a
 * word. */
typedef struct ib_plugin_config_stray {
    const char *entry; /* the "NAME=STRING" pair or the "VARIABLE=value" environment entry
                          (BORROWED from the arrays searched) */
    size_t name_len;   /* length of its NAME (or VARIABLE) at the start of `entry` */
    bool from_env;     /* an IB_PLUGIN_CONFIG_<NAME> variable, not a pair */
    /* the loaded plugin it most likely meant (within a few edits), or
     * NULL; BORROWED from `names` */
    const char *nearest;
} ib_plugin_config_stray;

/* Finds the first configuration that names none of the `count` plugins
 * in `names`: a "NAME=STRING" of `cli_pairs` (NULL-terminated; may be
 * NULL), then an IB_PLUGIN_CONFIG_<NAME> entry of `env` (environ's
 * "VARIABLE=value" form, NULL-terminated; may be NULL) that is no loaded
 * plugin's variable. Returns true with `*out` filled when there is one,
 * false when every one names a loaded plugin. Pure. */
bool ib_plugin_config_find_stray(ib_plugin_config_stray *out, const char *const *cli_pairs,
                                 char *const *env, const char *const *names, size_t count);

#endif
