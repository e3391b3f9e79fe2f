/* SPDX-License-Identifier: Apache-2.0 */
/* ibus version: the versions a bug report needs. */
#include <stdio.h>
#include <string.h>

#include <nats/nats.h>
#include <protobuf-c/protobuf-c.h>
#include <sqlite3.h>

#include "commands.h"
#include "infinity_bus/plugin.h"
#include <infinity_bus/version.h>

/* Other arguments are ignored, as they always were: `ibus --version`
 * lands here too. */
int ib_cmd_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            ib_cmd_usage(stdout, &ib_cmd_version_desc, NULL, 0);
            return 0;
        }
    }
    printf("ibus %s\n", IB_VERSION);
    printf("plugin ABI %d.%d\n", IB_ABI_MAJOR, IB_ABI_MINOR);
    printf("nats.c %s\n", nats_GetVersion());
    printf("SQLite %s\n", sqlite3_libversion());
    printf("protobuf-c %s\n", protobuf_c_version());
    return 0;
}

const ib_cmd_desc ib_cmd_version_desc = {
    .name = "version",
    .synopsis = "",
    .summary = "versions of ibus, its plugin ABI, nats.c, SQLite, protobuf-c",
    .description = "Print the versions of ibus, of the plugin ABI it speaks and of the nats.c, "
                   "SQLite and protobuf-c libraries it runs with, one per line.",
    .main = ib_cmd_version,
};
