/* SPDX-License-Identifier: Apache-2.0 */
/* Connection options shared by the subcommands that talk to NATS. */
#ifndef IB_CLI_NATS_OPTIONS_H
#define IB_CLI_NATS_OPTIONS_H

#include "jetstream.h"
#include "options.h"

/* Entries for --nats-url, --creds, --nkey, --token, --user, --password,
 * --tls-ca, --tls-cert, --tls-key, --js-domain and --js-api-prefix,
 * writing into `c`. */
#define IB_NATS_OPTIONS(c)                                                                           \
    {"nats-url",                                                                                     \
     IB_OPT_STRING,                                                                                  \
     &(c)->url,                                                                                      \
     "URL",                                                                                          \
     "nats://127.0.0.1:4222",                                                                        \
     "NATS server URL(s), comma-separated",                                                          \
     0,                                                                                              \
     0},                                                                                             \
        {"creds", IB_OPT_STRING, &(c)->creds_file, "FILE", NULL, "NATS credentials file (JWT)", 0,   \
         0},                                                                                         \
        {"nkey", IB_OPT_STRING, &(c)->nkey_seed_file, "FILE", NULL, "NKey user seed file", 0, 0},    \
        {"token", IB_OPT_STRING, &(c)->token, "TOKEN", NULL, "authentication token", 0, 0},          \
        {"user", IB_OPT_STRING, &(c)->user, "USER", NULL, "user name", 0, 0},                        \
        {"password", IB_OPT_STRING, &(c)->password, "PASSWORD", NULL, "password", 0, 0},             \
        {"tls-ca", IB_OPT_STRING, &(c)->tls_ca, "FILE", NULL, "CA bundle to verify the server", 0,   \
         0},                                                                                         \
        {"tls-cert", IB_OPT_STRING, &(c)->tls_cert, "FILE", NULL, "client certificate (PEM)", 0, 0}, \
        {"tls-key", IB_OPT_STRING, &(c)->tls_key, "FILE", NULL, "client private key (PEM)", 0, 0},   \
        {"js-domain",                                                                                \
         IB_OPT_STRING,                                                                              \
         &(c)->js_domain,                                                                            \
         "NAME",                                                                                     \
         NULL,                                                                                       \
         "JetStream domain to use, e.g. a leaf node's seen from its hub ($JS.NAME.API)",             \
         0,                                                                                          \
         0},                                                                                         \
    {                                                                                                \
        "js-api-prefix", IB_OPT_STRING, &(c)->js_api_prefix, "PREFIX", NULL,                         \
            "JetStream API prefix an account import gives (instead of $JS.API; not with "            \
            "--js-domain)",                                                                          \
            0, 0                                                                                     \
    }

/* Checks a --nats-url list before anything connects: every
 * comma-separated entry names a host and, when it has a port, a number in
 * 1..65535. Returns 0, or -1 with the reason, naming the option and the
 * entry, in `why` (cap bytes). */
int ib_cli_nats_url_check(const char *list, char *why, size_t cap);

/* ib_cli_nats_url_check on c->url, then --js-domain and --js-api-prefix:
 * each usable (js_api.h) and not both. Returns 0, or -1 with the reason,
 * naming the option, in `why`. */
int ib_cli_nats_check(const ib_nats_config *c, char *why, size_t cap);

#endif
