/* ibus: one binary with subcommands, in the style of the nats CLI. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: ibus <command> [options]\n\n"
                 "commands:\n"
                 "  run       consume a JetStream durable and run handler plugins once per event\n"
                 "  publish   publish events (arguments, generated, or JSON lines on stdin)\n"
                 "  markers   inspect, forget and prune markers in a recorder\n"
                 "  version   versions of ibus, its plugin ABI, nats.c, SQLite, protobuf-c\n\n"
                 "'ibus <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0)
        return ib_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "publish") == 0)
        return ib_cmd_publish(argc - 1, argv + 1);
    if (strcmp(cmd, "markers") == 0)
        return ib_cmd_markers(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return ib_cmd_version(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "ibus: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
