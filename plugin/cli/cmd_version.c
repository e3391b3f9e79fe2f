/* ibus version: the versions a bug report needs. */
#include <stdio.h>

#include <nats/nats.h>
#include <protobuf-c/protobuf-c.h>
#include <sqlite3.h>

#include "commands.h"
#include "infinity_bus/plugin.h"
#include <infinity_bus/version.h>

int ib_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ibus %s\n", IB_VERSION);
    printf("plugin ABI %d.%d\n", IB_ABI_MAJOR, IB_ABI_MINOR);
    printf("nats.c %s\n", nats_GetVersion());
    printf("SQLite %s\n", sqlite3_libversion());
    printf("protobuf-c %s\n", protobuf_c_version());
    return 0;
}
