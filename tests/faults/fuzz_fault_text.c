/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the texts the fault tests read from outside a process: a
 * fault spec (IB_FAULT_VFS, fault_vfs_parse) and a model worker's command
 * line (model_op_parse). Any bytes: no crash; a spec that parses only
 * holds faults that can be armed; a command that parses formats back to a
 * line that parses to the same command. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fault_vfs.h"
#include "model_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spec(const char *text)
{
    fault_spec f[FAULT_SPEC_MAX];
    size_t n = 0;
    char why[256];
    if (fault_vfs_parse(f, FAULT_SPEC_MAX, &n, text, why, sizeof(why)) != 0)
        return;
    assert(n <= FAULT_SPEC_MAX);
    for (size_t i = 0; i < n; i++)
        assert(f[i].nth > 0 && fault_vfs_result(f[i].kind, f[i].code) != 0);
}

static void check_command(const char *text)
{
    model_op a, b;
    char line[MODEL_LINE_MAX];
    if (model_op_parse(&a, text) != 0)
        return;
    int len = model_op_format(line, sizeof(line), &a);
    assert(len > 0 && line[len - 1] == '\n');
    line[len - 1] = '\0';
    assert(model_op_parse(&b, line) == 0);
    assert(a.kind == b.kind && a.seq == b.seq && a.n == b.n && a.arg == b.arg);
    assert(a.probe == b.probe && a.max_attempts == b.max_attempts);
    assert(strcmp(a.fault, b.fault) == 0 && memcmp(a.keys, b.keys, a.n * sizeof(a.keys[0])) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    check_spec(s);
    check_command(s);
    free(s);
    return 0;
}
