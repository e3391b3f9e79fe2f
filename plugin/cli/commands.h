/* SPDX-License-Identifier: Apache-2.0 */
/* The ibus subcommands: what each one is, as data, and its entry point.
 *
 * A command's description (name, synopsis, summary, actions, option table)
 * is the one source for `ibus <command> --help`, for the command list of
 * `ibus help` and for the manual page (man.h), so none of them can drift
 * from what the command parses.
 *
 * Each entry point takes the arguments after its name (argv[0] is the
 * subcommand) and returns the process exit status: 0 success, 1 runtime
 * failure, 2 bad configuration or usage. */
#ifndef IB_CLI_COMMANDS_H
#define IB_CLI_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

#include "options.h"

/* Room every command's option table fits in; each table checks it with a
 * _Static_assert where it is built. */
#define IB_CMD_MAX_OPTIONS 96

/* One action of a command that takes one as its first argument
 * (`ibus markers ACTION`). */
typedef struct ib_cmd_action {
    const char *name; /* "lookup" */
    const char *args; /* what follows the action, e.g. "ID"; NULL for nothing */
    const char *help; /* one line */
} ib_cmd_action;

typedef struct ib_cmd_desc {
    const char *name;             /* "run" */
    const char *synopsis;         /* what follows "ibus <name>", e.g. "[options] [PAYLOAD...]" */
    const char *summary;          /* one line, lower case, for the command list */
    const char *description;      /* a paragraph for --help and the manual page */
    const ib_cmd_action *actions; /* NULL when the command takes no action */
    size_t nactions;
    /* Writes the option table into `opts` (room for IB_CMD_MAX_OPTIONS)
     * and returns its length. The targets point into `targets`, a zeroed
     * block of targets_size bytes owned by the caller, which must outlive
     * every use of the table. NULL when the command has no options. */
    size_t (*options)(ib_opt *opts, void *targets);
    size_t targets_size;
    int (*main)(int argc, char **argv);
} ib_cmd_desc;

extern const ib_cmd_desc ib_cmd_run_desc;
extern const ib_cmd_desc ib_cmd_publish_desc;
extern const ib_cmd_desc ib_cmd_markers_desc;
extern const ib_cmd_desc ib_cmd_dlq_desc;
extern const ib_cmd_desc ib_cmd_status_desc;
extern const ib_cmd_desc ib_cmd_forward_desc;
extern const ib_cmd_desc ib_cmd_version_desc;

int ib_cmd_run(int argc, char **argv);
int ib_cmd_publish(int argc, char **argv);
int ib_cmd_markers(int argc, char **argv);
int ib_cmd_dlq(int argc, char **argv);
int ib_cmd_status(int argc, char **argv);
int ib_cmd_forward(int argc, char **argv);
int ib_cmd_version(int argc, char **argv);

/* Prints `ibus <cmd> --help` from the description and the option table
 * the command built (`opts`, `n`; n may be 0): the usage line, the
 * description, the actions and one entry per option with its environment
 * variable and default. */
void ib_cmd_usage(FILE *out, const ib_cmd_desc *d, const ib_opt *opts, size_t n);

/* Prints the command list of `ibus help`, one line per command of
 * `cmds` (n entries) with its summary. */
void ib_cmds_usage(FILE *out, const ib_cmd_desc *const *cmds, size_t n);

/* Finds the action named `name` among d's actions; NULL when there is none
 * (the caller says so, listing them with ib_cmd_actions_list). */
const ib_cmd_action *ib_cmd_action_find(const ib_cmd_desc *d, const char *name);

/* Writes d's action names, comma-separated, into buf (cap bytes, always
 * NUL-terminated, cut when too small); returns buf. */
char *ib_cmd_actions_list(char *buf, size_t cap, const ib_cmd_desc *d);

#endif
