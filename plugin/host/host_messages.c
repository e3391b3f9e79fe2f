/* SPDX-License-Identifier: Apache-2.0 */
/* The ways out that the loader and the recorder name as settings, as the
 * ibus command spells them (host.h: ib_host_flag_hint). */
#include "host.h"

#include <stdio.h>
#include <string.h>

/* A library's words for its opt-out, and the flag that sets it. */
static const struct {
    const char *setting;
    const char *flag;
} hints[] = {
    {"allow insecure plugin files", "pass --allow-insecure-plugins"},
    {"allow an insecure marker file", "pass --allow-insecure-db"},
};

char *ib_host_flag_hint(char *buf, size_t cap, const char *msg)
{
    snprintf(buf, cap, "%s", msg);
    for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
        char *at = strstr(buf, hints[i].setting);
        if (at == NULL)
            continue;
        char tail[512];
        snprintf(tail, sizeof(tail), "%s", at + strlen(hints[i].setting));
        size_t head = (size_t)(at - buf);
        snprintf(at, cap - head, "%s%s", hints[i].flag, tail);
    }
    return buf;
}
