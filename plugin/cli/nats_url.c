/* SPDX-License-Identifier: Apache-2.0 */
/* --nats-url, checked before anything connects (see nats_options.h). */
#include "nats_options.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "js_api.h"
#include "redact.h"

/* Checks one URL of `len` bytes at `u`: [scheme://][user[:pass]@]host[:port]
 * with a port of digits in 1..65535. */
static int check_one(const char *u, size_t len, char *why, size_t cap)
{
    char url[512], shown[IB_REDACT_MAX];
    if (len == 0) {
        snprintf(why, cap, "--nats-url: empty entry in the list (URLs are comma-separated)");
        return -1;
    }
    snprintf(url, sizeof(url), "%.*s", (int)len, u);
    ib_redact_url(shown, sizeof(shown), url); /* what the messages show */
    const char *host = strstr(url, "://");
    host = host != NULL ? host + 3 : url;
    const char *at = strrchr(host, '@');
    host = at != NULL ? at + 1 : host;
    const char *end = host[0] == '[' ? strchr(host, ']') : host;
    const char *colon = end != NULL ? strchr(end, ':') : NULL;
    if (host[0] == '\0' || host[0] == ':' || end == NULL) {
        snprintf(why, cap, "--nats-url: '%s' names no host (e.g. nats://127.0.0.1:4222)", shown);
        return -1;
    }
    if (colon == NULL)
        return 0; /* nats.c adds the default port */
    const char *port = colon + 1;
    char *stop = NULL;
    long p = isdigit((unsigned char)port[0]) ? strtol(port, &stop, 10) : -1;
    if (p < 1 || p > 65535 || (stop != NULL && *stop != '\0' && *stop != '/')) {
        snprintf(why, cap,
                 "--nats-url: '%s' has port '%.*s', expected a number in 1..65535 (e.g. "
                 "nats://127.0.0.1:4222)",
                 shown, (int)strcspn(port, "/?#"), port);
        return -1;
    }
    return 0;
}

int ib_cli_nats_url_check(const char *list, char *why, size_t cap)
{
    if (list == NULL || list[0] == '\0')
        return 0; /* the default */
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        while (len > 0 && *p == ' ')
            p++, len--;
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (check_one(p, len, why, cap) != 0)
            return -1;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

int ib_cli_nats_check(const ib_nats_config *c, char *why, size_t cap)
{
    bool domain = c->js_domain != NULL && c->js_domain[0] != '\0';
    bool prefix = c->js_api_prefix != NULL && c->js_api_prefix[0] != '\0';
    const char *problem = NULL;
    if (ib_cli_nats_url_check(c->url, why, cap) != 0)
        return -1;
    if (domain && prefix) {
        snprintf(why, cap,
                 "--js-domain and --js-api-prefix exclude each other: a domain stands for the "
                 "prefix $JS.<domain>.API; give one");
        return -1;
    }
    if (domain && (problem = ib_js_domain_problem(c->js_domain)) != NULL)
        snprintf(why, cap, "--js-domain '%.200s': %s", c->js_domain, problem);
    else if (prefix && (problem = ib_js_api_prefix_problem(c->js_api_prefix)) != NULL)
        snprintf(why, cap, "--js-api-prefix '%.200s': %s", c->js_api_prefix, problem);
    return problem != NULL ? -1 : 0;
}
