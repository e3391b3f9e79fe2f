/* SPDX-License-Identifier: Apache-2.0 */
/* layering CHECK ARG: runs one house-keeping check and exits 1 when it
 * finds anything. CHECK is one of
 *   includes SRC         the include rules (rule table in parts.c)
 *   file-cycles SRC      no circle of quoted includes between files
 *   target-cycles EDGES  no circle of CMake targets (edge file from targets.cmake)
 *   function-length SRC  no product function longer than 80 lines
 *   call-cycles SRC      no circle of .c files using each other's functions
 * SRC is the source root; only the product folders under it are read. */
#include <stdio.h>
#include <string.h>

#include "layering.h"

#define MAX_FUNCTION_LINES 80

static int usage(void)
{
    fprintf(stderr, "usage: layering includes|file-cycles|function-length|call-cycles SRC\n"
                    "       layering target-cycles EDGES\n");
    return 2;
}

static int verdict(const char *check, int findings)
{
    if (findings == 0) {
        printf("layering %s: ok\n", check);
        return 0;
    }
    printf("layering %s: %d finding%s\n", check, findings, findings == 1 ? "" : "s");
    return 1;
}

int main(int argc, char **argv)
{
    lay_tree t;
    int findings;
    if (argc != 3)
        return usage();
    const char *check = argv[1];
    if (strcmp(check, "target-cycles") == 0)
        return verdict(check, lay_check_target_cycles(argv[2]));
    if (strcmp(check, "includes") != 0 && strcmp(check, "file-cycles") != 0 &&
        strcmp(check, "function-length") != 0 && strcmp(check, "call-cycles") != 0)
        return usage();
    if (lay_tree_load(&t, argv[2]) != 0)
        return 2;
    if (strcmp(check, "includes") == 0)
        findings = lay_check_table() + lay_check_includes(&t);
    else if (strcmp(check, "file-cycles") == 0)
        findings = lay_check_file_cycles(&t);
    else if (strcmp(check, "call-cycles") == 0)
        findings = lay_check_call_cycles(&t);
    else
        findings = lay_check_length(&t, MAX_FUNCTION_LINES);
    lay_tree_free(&t);
    return verdict(check, findings);
}
