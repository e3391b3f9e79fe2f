/* SPDX-License-Identifier: Apache-2.0 */
#include "js_api.h"

#include <stdio.h>
#include <string.h>

#define DOMAIN_MAX 200

static bool bad_byte(unsigned char c)
{
    return c <= 0x20 || c == 0x7f || c == '*' || c == '>';
}

const char *ib_js_domain_problem(const char *domain)
{
    if (domain == NULL || domain[0] == '\0')
        return "is empty";
    size_t len = strlen(domain);
    if (len > DOMAIN_MAX)
        return "is longer than 200 bytes";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)domain[i];
        if (c == '.' || c == '*' || c == '>')
            return "holds '.', '*' or '>' (a domain is one subject token)";
        if (bad_byte(c))
            return "holds a space or a control byte";
    }
    return NULL;
}

const char *ib_js_api_prefix_problem(const char *prefix)
{
    if (prefix == NULL || prefix[0] == '\0')
        return "is empty";
    size_t len = strlen(prefix);
    if (prefix[len - 1] == '.')
        len--;
    if (len == 0)
        return "is empty";
    if (len >= IB_JS_API_PREFIX_MAX)
        return "is longer than 255 bytes";
    if (prefix[0] == '.')
        return "has an empty token";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)prefix[i];
        if (c == '*' || c == '>')
            return "holds a wildcard ('*' or '>')";
        if (bad_byte(c))
            return "holds a space or a control byte";
        if (c == '.' && prefix[i + 1] == '.')
            return "has an empty token";
    }
    return NULL;
}

const char *ib_js_api_prefix(char *out, const char *domain, const char *prefix)
{
    bool has_domain = domain != NULL && domain[0] != '\0';
    bool has_prefix = prefix != NULL && prefix[0] != '\0';
    const char *why = NULL;
    snprintf(out, IB_JS_API_PREFIX_MAX, "%s", IB_JS_API_DEFAULT);
    if (has_domain && has_prefix)
        return "a domain and an API prefix exclude each other";
    if (has_domain && (why = ib_js_domain_problem(domain)) == NULL) {
        snprintf(out, IB_JS_API_PREFIX_MAX, "$JS.%s.API", domain);
    } else if (has_prefix && (why = ib_js_api_prefix_problem(prefix)) == NULL) {
        size_t len = strlen(prefix);
        if (prefix[len - 1] == '.')
            len--;
        snprintf(out, IB_JS_API_PREFIX_MAX, "%.*s", (int)len, prefix);
    }
    return why;
}

bool ib_js_api_is_default(const char *prefix)
{
    return prefix == NULL || strcmp(prefix, IB_JS_API_DEFAULT) == 0;
}
