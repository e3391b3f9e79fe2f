/* SPDX-License-Identifier: Apache-2.0 */
/* The manual page ibus(1), written in roff with the man(7) macros.
 *
 * Every command, option, action and IB_* variable on the page comes from
 * the commands' description data (commands.h), the same data their --help
 * is printed from; what no table holds (exit statuses, signals, files,
 * variables read outside the option tables) is data in man.c. The build
 * runs `ibus help --man` to make ibus.1 and installs it. */
#ifndef IB_CLI_MAN_H
#define IB_CLI_MAN_H

#include <stdio.h>

#include "commands.h"

/* What the page says that the build decides. All strings are borrowed for
 * the call. */
typedef struct ib_man_page {
    const char *version;    /* IB_VERSION, for the page's footer */
    const char *date;       /* "YYYY-MM-DD" fixed by the build; "" for none */
    const char *plugin_dir; /* where the install puts the example plugins */
    const ib_cmd_desc *const *cmds;
    size_t ncmds;
} ib_man_page;

/* Writes the whole page to `out`. Returns 0, or -1 when memory for the
 * option tables ran out or writing failed (errno says why). */
int ib_man_write(FILE *out, const ib_man_page *page);

/* Writes `text` so that roff prints it as it is: a backslash becomes \e,
 * every '-' becomes \- (so option names neither break nor turn into
 * hyphens), and a '.' or '\'' that would start a line (at the start of
 * `text` or after a newline in it) is preceded by \& so roff does not read
 * the line as a request. */
void ib_roff_escape(FILE *out, const char *text);

#endif
