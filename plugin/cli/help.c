/* SPDX-License-Identifier: Apache-2.0 */
/* The help texts printed from the commands' description data
 * (commands.h); the manual page (man.c) is printed from the same data. */
#include <string.h>

#include "commands.h"

/* Writes `text` in lines of at most `width` columns, breaking at spaces (a
 * longer word gets a line of its own). */
static void write_wrapped(FILE *out, const char *text, size_t width)
{
    size_t col = 0;
    while (*text != '\0') {
        size_t len = strcspn(text, " ");
        if (col > 0 && col + 1 + len > width) {
            fputc('\n', out);
            col = 0;
        } else if (col > 0) {
            fputc(' ', out);
            col++;
        }
        fwrite(text, 1, len, out);
        col += len;
        text += len;
        text += strspn(text, " ");
    }
    fputc('\n', out);
}

void ib_cmd_usage(FILE *out, const ib_cmd_desc *d, const ib_opt *opts, size_t n)
{
    fprintf(out, "usage: ibus %s%s%s\n\n", d->name, d->synopsis[0] != '\0' ? " " : "", d->synopsis);
    write_wrapped(out, d->description, 78);
    if (d->nactions > 0)
        fprintf(out, "\nactions:\n");
    for (size_t i = 0; i < d->nactions; i++) {
        const ib_cmd_action *a = &d->actions[i];
        char head[80];
        snprintf(head, sizeof(head), "%s%s%s", a->name, a->args != NULL ? " " : "",
                 a->args != NULL ? a->args : "");
        fprintf(out, "  %-34s %s\n", head, a->help);
    }
    if (n > 0) {
        fprintf(out, "\noptions (each also from its environment variable; flags win):\n");
        ib_opts_usage(out, opts, n);
    }
}

void ib_cmds_usage(FILE *out, const ib_cmd_desc *const *cmds, size_t n)
{
    fprintf(out, "usage: ibus <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  %-9s %s\n", cmds[i]->name, cmds[i]->summary);
    fprintf(out, "\n'ibus <command> --help' describes a command's options.\n");
}

const ib_cmd_action *ib_cmd_action_find(const ib_cmd_desc *d, const char *name)
{
    for (size_t i = 0; i < d->nactions; i++)
        if (strcmp(d->actions[i].name, name) == 0)
            return &d->actions[i];
    return NULL;
}

char *ib_cmd_actions_list(char *buf, size_t cap, const ib_cmd_desc *d)
{
    size_t used = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < d->nactions && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i > 0 ? ", " : "", d->actions[i].name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}
