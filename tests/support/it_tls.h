/* SPDX-License-Identifier: Apache-2.0 */
/* Test certificates made with the openssl command: a CA, a server
 * certificate for IP:127.0.0.1 and a client certificate, all EC P-256,
 * valid for two days. */
#ifndef IB_IT_TLS_H
#define IB_IT_TLS_H

#include <limits.h>
#include <stdbool.h>

typedef struct it_tls_files {
    char ca[PATH_MAX];
    char server_cert[PATH_MAX], server_key[PATH_MAX];
    char client_cert[PATH_MAX], client_key[PATH_MAX];
} it_tls_files;

/* Makes the files under `dir` (created if missing); false, with the failing
 * step on stderr, if openssl is missing or fails. */
bool it_tls_make(it_tls_files *out, const char *dir);

#endif
