/* SPDX-License-Identifier: Apache-2.0 */
/* Loader internals: the plugin struct (loader.c) and a test hook. */
#ifndef IB_LOADER_INTERNAL_H
#define IB_LOADER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "infinity_bus/plugin.h"

/* A loaded plugin. `desc` and `handlers` are this host's view of what the
 * plugin declared: copied up to the plugin's own struct sizes and
 * zero-extended, so fields an older plugin lacks read as NULL/0 and fields
 * a newer one appended are never read. Their strings point into the
 * library and die with dlclose. */
struct ib_plugin {
    void *dl;
    char *path; /* as given to ib_plugin_open(), for messages */
    ib_plugin_desc desc;
    ib_handler_desc *handlers;
    size_t handler_count;
    void *state;      /* what init() returned */
    bool initialised; /* init() succeeded (or there is none): fini() is due */
};

/* Test hook: when set, ib_plugin_open() calls it with the path as given
 * after the file passed its checks and before it is loaded, so a test can
 * swap the file there and see that the one checked is the one loaded.
 * NULL outside tests. */
extern void (*ib__plugin_before_load)(const char *path);

#endif
