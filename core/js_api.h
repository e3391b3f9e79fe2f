/* SPDX-License-Identifier: Apache-2.0 */
/* Where the JetStream API is reached: the subject prefix of its requests.
 *
 * A client reaches its own server's JetStream under "$JS.API". A
 * JetStream of another domain (a leaf node's seen from its hub, or the
 * hub's from a leaf) answers under "$JS.<domain>.API", which the servers
 * map to the other side's "$JS.API"; an account that imports another
 * account's JetStream reaches it under whatever prefix the import gives.
 * nats.c's JetStream context takes one or the other (jsOptions Domain or
 * Prefix); what ibus sends to the API by hand (pull requests, stream
 * names, the kv: recorder's reads) builds its subjects from the one prefix
 * made here, so the two never disagree.
 *
 * A kv: bucket's writes travel the same way. The server maps
 * "<prefix>.$KV.>" to "$KV.>" in the bucket's domain, so with a prefix
 * other than the default a write goes to "<prefix>.$KV.<bucket>.<key>",
 * as nats.c's kvStore sends it, while reads name the key as the stream
 * stores it, "$KV.<bucket>.<key>". */
#ifndef IB_JS_API_H
#define IB_JS_API_H

#include <stdbool.h>

/* The prefix of a client's own JetStream. */
#define IB_JS_API_DEFAULT "$JS.API"
/* Buffer size for a prefix, with its NUL. */
#define IB_JS_API_PREFIX_MAX 256

/* NULL when `domain` can name a JetStream domain: one token of 1..200
 * bytes, without '.', '*', '>', space or control byte; else why not, as a
 * phrase to follow the setting's name ("holds '.', '*' or '>'"). A static
 * string. */
const char *ib_js_domain_problem(const char *domain);

/* NULL when `prefix` can be an API prefix: a subject of literal tokens
 * (no wildcard, space, control byte or empty token) shorter than
 * IB_JS_API_PREFIX_MAX; one trailing '.' is allowed and dropped, as nats.c
 * drops it. Else why not, as ib_js_domain_problem says it. */
const char *ib_js_api_prefix_problem(const char *prefix);

/* Writes the prefix to use into `out` (IB_JS_API_PREFIX_MAX bytes):
 * "$JS.<domain>.API" for a domain, `prefix` without its trailing '.' for a
 * prefix, IB_JS_API_DEFAULT when neither is given (NULL or ""). Returns
 * NULL, or why the two cannot be used (both given, or the problem of the
 * one given, as above); `out` then holds the default. */
const char *ib_js_api_prefix(char *out, const char *domain, const char *prefix);

/* Whether `prefix`, as ib_js_api_prefix wrote it, is the default one:
 * then KV writes go to "$KV..." subjects themselves. */
bool ib_js_api_is_default(const char *prefix);

#endif
