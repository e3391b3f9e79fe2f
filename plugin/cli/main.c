/* SPDX-License-Identifier: Apache-2.0 */
/* ibus: one binary with subcommands, in the style of the nats CLI. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "man.h"
#include <infinity_bus/version.h>

/* The build sets both (plugin/cli/CMakeLists.txt): the page's date, fixed
 * so that the same sources make the same page, and the install's plugin
 * directory. */
#ifndef IB_MAN_DATE
#define IB_MAN_DATE ""
#endif
#ifndef IB_PLUGIN_DIR
#error "the build defines IB_PLUGIN_DIR"
#endif

static int help_main(int argc, char **argv);

static const ib_cmd_desc help_desc = {
    .name = "help",
    .synopsis = "[--man | COMMAND]",
    .summary = "this list; 'ibus help --man' prints the manual page ibus(1)",
    .description = "Print the list of commands, the --help of COMMAND, or with --man the manual "
                   "page ibus(1) in roff, made from the same option tables as every --help.",
    .main = help_main,
};

/* Every command, in the order of the command list and of the page. */
static const ib_cmd_desc *const commands[] = {
    &ib_cmd_run_desc,    &ib_cmd_publish_desc, &ib_cmd_markers_desc, &ib_cmd_dlq_desc,
    &ib_cmd_status_desc, &ib_cmd_forward_desc, &ib_cmd_version_desc, &help_desc,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const ib_cmd_desc *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

/* ibus help: the command list (also for any unknown word, as it always
 * was), one command's --help, or the page. */
static int help_main(int argc, char **argv)
{
    const char *arg = argc > 1 ? argv[1] : "";
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        ib_cmd_usage(stdout, &help_desc, NULL, 0);
        return 0;
    }
    if (strcmp(arg, "--man") == 0) {
        const ib_man_page page = {.version = IB_VERSION,
                                  .date = IB_MAN_DATE,
                                  .plugin_dir = IB_PLUGIN_DIR,
                                  .cmds = commands,
                                  .ncmds = NCOMMANDS};
        if (ib_man_write(stdout, &page) != 0) {
            fprintf(stderr, "ibus help --man: cannot write the page: %s\n", strerror(errno));
            return 1;
        }
        return 0;
    }
    const ib_cmd_desc *d = find_command(arg);
    if (d != NULL && d != &help_desc) {
        char help[] = "--help";
        char *sub[] = {argv[1], help, NULL};
        return d->main(2, sub);
    }
    ib_cmds_usage(stdout, commands, NCOMMANDS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        ib_cmds_usage(stderr, commands, NCOMMANDS);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0)
        cmd = "version";
    else if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        cmd = "help";
    const ib_cmd_desc *d = find_command(cmd);
    if (d != NULL)
        return d->main(argc - 1, argv + 1);
    fprintf(stderr, "ibus: unknown command '%s'\n\n", cmd);
    ib_cmds_usage(stderr, commands, NCOMMANDS);
    return 2;
}
