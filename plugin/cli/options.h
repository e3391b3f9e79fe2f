/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line options of the ibus subcommands.
 *
 * Each subcommand declares a table of options. Every option can also come
 * from an environment variable IB_<NAME> (upper case, '-' becomes '_'):
 * defaults apply first, then the environment, then flags, so flags win.
 * A repeatable option given on the command line replaces the environment's
 * list; in the environment its values are separated by commas.
 *
 * Durations take a unit: 250ms, 30s, 5m, 2h, 1d; a bare number is seconds.
 * Bad values are configuration errors naming the option:
 *   "--max-deliver: expected an integer in 1..1000, got 'x'". */
#ifndef IB_CLI_OPTIONS_H
#define IB_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

typedef enum ib_opt_kind {
    IB_OPT_STRING,   /* target: const char ** (BORROWED from argv/environ) */
    IB_OPT_LIST,     /* target: ib_strlist * (repeatable) */
    IB_OPT_INT,      /* target: int64_t * */
    IB_OPT_DURATION, /* target: int64_t * in milliseconds */
    IB_OPT_FLAG,     /* target: bool *; no value on the command line; env 1/0/true/false */
    IB_OPT_DOUBLE,   /* target: double * */
    IB_OPT_CHOICE,   /* target: int *, the index of the value among the metavar's
                        '|'-separated choices ("dead-letter|drop|log") */
} ib_opt_kind;

#define IB_STRLIST_MAX 64

typedef struct ib_strlist {
    const char *items[IB_STRLIST_MAX + 1]; /* NULL-terminated */
    size_t count;
    char *owned_; /* copy of an environment list, split in place */
} ib_strlist;

typedef struct ib_opt {
    const char *name; /* long name without dashes, e.g. "nats-url" */
    ib_opt_kind kind;
    void *target;
    const char *metavar; /* e.g. "URL" */
    const char *def;     /* default as text; NULL = none */
    const char *help;    /* one line */
    int64_t min, max;    /* bounds for INT and DURATION (ms); both 0 = unbounded */
} ib_opt;

/* Applies defaults, environment and then argv[1..] to the targets.
 * Positional arguments are collected into `positional` (may be NULL when
 * none are allowed). "--help"/"-h" sets *help. Returns IB_OK or
 * IB_ERR_CONFIG with a message naming the option and the reason. */
ib_status ib_opts_parse(const ib_opt *opts, size_t n, int argc, char **argv, ib_strlist *positional,
                        bool *help, ib_error *err);

/* Prints the option entries of a command's --help, two lines per option:
 * "--name METAVAR  help" and "[IB_NAME; default X]". The usage line above
 * them is the command's (commands.h: ib_cmd_usage). */
void ib_opts_usage(FILE *out, const ib_opt *opts, size_t n);

/* Writes the environment variable of option `name` (IB_ + upper case, '-'
 * becomes '_') into buf, cap bytes, cut when too small; returns buf. */
char *ib_opt_env_name(char *buf, size_t cap, const char *name);

/* The value placeholder of an option: its metavar, "VALUE" when it has
 * none, NULL for a flag (which takes no value). Static text. */
const char *ib_opt_metavar(const ib_opt *o);

/* Parses a duration ("250ms", "30s", "5m", "2h", "1d", "15" = seconds)
 * into milliseconds. Returns 0 or -1. */
int ib_parse_duration_ms(int64_t *out, const char *text);

/* Frees what parsing allocated for lists. */
void ib_opts_release(const ib_opt *opts, size_t n);

#endif
