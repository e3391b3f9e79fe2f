/* SPDX-License-Identifier: Apache-2.0 */
/* The layering rules as data. Edit here when the house changes on purpose:
 * a new part is one line in lay_parts and one in lay_allowed; a new
 * dependency is one word in lay_allowed. */
#include "layering.h"

/* Folders the checks read. tests/ is not among them: a test may reach its
 * own part's internals. Roots that do not exist (yet) are skipped. */
const char *const lay_roots[] = {"core",    "recorders",   "plugin", "bench",
                                 "include", "idempotency", NULL};

/* Every product file belongs to the part with the longest matching `dir`;
 * a file under a root that no part claims is a finding. */
const lay_part lay_parts[] = {
    {"proto", NULL, NULL}, /* event.pb-c.h, generated from proto/ */
    {"core", "core", "core"},
    {"recorders", "recorders", "recorders/include"},
    {"abi", "plugin/include", "plugin/include"}, /* infinity_bus/plugin.h */
    {"dispatch", "plugin/dispatch", "plugin/dispatch/include"},
    {"loader", "plugin/loader", "plugin/loader/include"},
    {"ops", "plugin/ops", "plugin/ops/include"},
    {"nats", "plugin/nats", "plugin/nats/include"},
    {"host", "plugin/host", "plugin/host/include"},
    {"cli", "plugin/cli", NULL},
    {"examples", "plugin/examples", NULL},
    {"bench", "bench", NULL},
    /* store_layouts (issue 30) measures SQLite layouts, not our code: its
     * files may include nothing of the project, which the empty line in
     * lay_allowed enforces; bench/store_layouts.c is its driver. */
    {"store_layouts", "bench/store_layouts", "bench/store_layouts"},
    {"api", "include", "include"}, /* installed library headers */
    {"idempotency", "idempotency", "idempotency/include"},
};
const size_t lay_nparts = sizeof lay_parts / sizeof lay_parts[0];

/* Which parts' headers a part may include directly, one line per part:
 * "part: allowed...". Data flows one way, so this must stay a DAG (the
 * includes check verifies it): lowest first, and no part names one listed
 * below it. A part not listed may include nothing but itself.
 *
 * The check prints a note for every edge here that no include uses, so the
 * table can shrink. */
const char *const lay_allowed[] = {
    "api:",
    "core:        proto api",
    "recorders:   core api",
    "abi:",
    "dispatch:    core recorders abi",
    "loader:      core abi",
    "ops:         core",
    "nats:        core abi",
    "host:        core recorders dispatch loader ops nats api",
    "cli:         core recorders abi nats host api",
    "examples:    abi core", /* core/redact.c only, compiled into the http plugin */
    "store_layouts:",
    "bench:       core recorders abi store_layouts",
    "idempotency: core recorders api",
    NULL,
};

/* Lower layers that must never include anything under plugin/, whatever
 * the table above says. */
const char *const lay_low_parts[] = {"core", "recorders", NULL};

/* Headers the build generates, which the source tree does not hold:
 * {file name, owning part}. A header made by configure_file from a
 * "<name>.in" template in a part's folder needs no line here. */
const char *const lay_generated[][2] = {
    {"event.pb-c.h", "proto"},
    {NULL, NULL},
};
