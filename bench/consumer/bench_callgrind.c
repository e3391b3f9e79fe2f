/* SPDX-License-Identifier: Apache-2.0 */
/* Reading instruction counts out of a callgrind profile. Instruction
 * counts do not move with the load of a shared machine, so they show what
 * a change to the hot path costs where wall-clock rates cannot. */
#include "bench.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "1,234,567" -> 1234567; stops at the first character that is neither a
 * digit nor a comma. */
static uint64_t parse_grouped(const char *s)
{
    uint64_t v = 0;
    for (; *s == ',' || isdigit((unsigned char)*s); s++)
        if (*s != ',')
            v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

static ib_status read_total(uint64_t *total, const char *file, ib_error *err)
{
    char line[4096];
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return ib_error_set(err, IB_ERR_IO, "callgrind output %s: cannot open", file);
    *total = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "totals:", 7) == 0 || strncmp(line, "summary:", 8) == 0) {
            const char *p = strchr(line, ':') + 1;
            while (*p == ' ')
                p++;
            *total = strtoull(p, NULL, 10);
        }
    }
    fclose(f);
    if (*total == 0)
        return ib_error_set(err, IB_ERR_IO, "callgrind output %s: no totals line", file);
    return IB_OK;
}

ib_status ib__bench_callgrind_read(ib__bench_instr *out, const char *file, const char *function,
                                   ib_error *err)
{
    char report[1100], pattern[200], line[8192];
    memset(out, 0, sizeof(*out));
    ib_status st = read_total(&out->total, file, err);
    if (st != IB_OK || function == NULL)
        return st;

    snprintf(report, sizeof(report), "%s.annotated", file);
    char *argv[] = {"callgrind_annotate", "--inclusive=yes", (char *)file, NULL};
    if (ib__bench_run(report, argv, 120000) != 0)
        return ib_error_set(err, IB_ERR_IO, "callgrind_annotate %s failed (see %s)", file, report);
    /* Lines read "  12,345,678 (37.1%)  dir/file.c:function [binary]". */
    snprintf(pattern, sizeof(pattern), ":%s ", function);
    FILE *f = fopen(report, "re");
    if (f == NULL)
        return ib_error_set(err, IB_ERR_IO, "%s: cannot open", report);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, pattern) == NULL)
            continue;
        const char *p = line;
        while (*p == ' ')
            p++;
        out->hot_path = parse_grouped(p);
        break;
    }
    fclose(f);
    if (out->hot_path == 0)
        return ib_error_set(err, IB_ERR_IO, "%s: no line for %s", report, function);
    return IB_OK;
}
