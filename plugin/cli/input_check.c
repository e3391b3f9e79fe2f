/* SPDX-License-Identifier: Apache-2.0 */
/* Names, subjects and header text given on the command line
 * (input_check.h). */
#include "input_check.h"

#include <stdio.h>
#include <string.h>

#include "jetstream.h"

/* The value as it may be printed: control bytes as \xNN, cut at 120
 * bytes. */
static const char *shown(char *buf, size_t cap, const char *v)
{
    size_t n = 0;
    for (; *v != '\0' && n + 5 < cap && n < 120; v++) {
        unsigned char c = (unsigned char)*v;
        if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
        else
            buf[n++] = (char)c;
    }
    buf[n] = '\0';
    return buf;
}

static int refuse(const char *cmd, const char *option, const char *value, const char *why)
{
    char v[160];
    fprintf(stderr, "ibus %s: %s '%s': %s\n", cmd, option, shown(v, sizeof(v), value), why);
    return -1;
}

const char *ib_cli_given(const char *value)
{
    return value != NULL && value[0] != '\0' ? value : NULL;
}

int ib_cli_check_name(const char *cmd, const char *option, const char *value)
{
    const char *why = value != NULL ? ib_nats_name_problem(value) : NULL;
    return why == NULL ? 0 : refuse(cmd, option, value, why);
}

int ib_cli_check_subject(const char *cmd, const char *option, const char *value, unsigned flags)
{
    const char *why = value != NULL ? ib_nats_subject_problem(value, flags) : NULL;
    return why == NULL ? 0 : refuse(cmd, option, value, why);
}

int ib_cli_check_subject_list(const char *cmd, const char *option, const char *list)
{
    char one[1100];
    for (const char *p = list; p != NULL;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) - 1 ? len : sizeof(one) - 1), p);
        const char *why = ib_nats_subject_problem(one, IB_SUBJECT_WILDCARDS);
        if (why != NULL)
            return refuse(cmd, option, one, why);
        p = comma != NULL ? comma + 1 : NULL;
    }
    return 0;
}

int ib_cli_check_text(const char *cmd, const char *option, const char *value)
{
    long at = ib_nats_control_at(value);
    if (at < 0)
        return 0;
    char why[80];
    snprintf(why, sizeof(why), "holds a control byte (0x%02x at byte %ld)",
             (unsigned char)value[at], at);
    return refuse(cmd, option, value, why);
}
