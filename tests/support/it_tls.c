/* SPDX-License-Identifier: Apache-2.0 */
#include "it_tls.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "it_files.h"
#include "it_proc.h"

/* Our own minimal openssl configuration, so the result does not depend on
 * the machine's openssl.cnf. */
static const char cnf_text[] = "[req]\n"
                               "distinguished_name = dn\n"
                               "prompt = no\n"
                               "[dn]\n"
                               "CN = ibus-it\n"
                               "[ca_ext]\n"
                               "basicConstraints = critical,CA:TRUE\n"
                               "keyUsage = critical,keyCertSign,cRLSign\n"
                               "subjectKeyIdentifier = hash\n"
                               "[server_ext]\n"
                               "basicConstraints = CA:FALSE\n"
                               "keyUsage = critical,digitalSignature\n"
                               "extendedKeyUsage = serverAuth\n"
                               "subjectAltName = IP:127.0.0.1\n"
                               "[client_ext]\n"
                               "basicConstraints = CA:FALSE\n"
                               "keyUsage = critical,digitalSignature\n"
                               "extendedKeyUsage = clientAuth\n";

static const char *openssl_path(void)
{
#ifdef IT_OPENSSL
    return IT_OPENSSL;
#else
    return "/usr/bin/openssl";
#endif
}

static bool openssl(const char *dir, const char *step, char *const argv[])
{
    it_proc p;
    int st = it_proc_run(&p, dir, step, NULL, argv, 60000);
    if (st != 0) {
        fprintf(stderr, "it_tls: openssl %s failed (status %d)\n", step, st);
        it_dump_logs(dir, 20);
        return false;
    }
    return true;
}

#define ARGV(...) ((char *const[]){__VA_ARGS__, NULL})

/* A key and a signing request, then the certificate signed by the CA. */
static bool leaf(const char *dir, const char *cnf, const char *ca, const char *ca_key,
                 const char *name, const char *subject, const char *ext, const char *serial,
                 const char *cert, const char *key)
{
    char csr[PATH_MAX], step[64];
    snprintf(csr, sizeof(csr), "%s/%s.csr", dir, name);
    snprintf(step, sizeof(step), "%s-req", name);
    if (!openssl(dir, step,
                 ARGV((char *)openssl_path(), "req", "-new", "-config", (char *)cnf, "-newkey",
                      "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                      (char *)key, "-out", csr, "-subj", (char *)subject)))
        return false;
    snprintf(step, sizeof(step), "%s-sign", name);
    return openssl(dir, step,
                   ARGV((char *)openssl_path(), "x509", "-req", "-in", csr, "-CA", (char *)ca,
                        "-CAkey", (char *)ca_key, "-set_serial", (char *)serial, "-days", "2",
                        "-extfile", (char *)cnf, "-extensions", (char *)ext, "-out", (char *)cert));
}

bool it_tls_make(it_tls_files *f, const char *dir)
{
    char cnf[PATH_MAX], ca_key[PATH_MAX];
    memset(f, 0, sizeof(*f));
    mkdir(dir, 0700);
    snprintf(cnf, sizeof(cnf), "%s/openssl.cnf", dir);
    snprintf(ca_key, sizeof(ca_key), "%s/ca.key", dir);
    snprintf(f->ca, sizeof(f->ca), "%s/ca.pem", dir);
    snprintf(f->server_cert, sizeof(f->server_cert), "%s/server.pem", dir);
    snprintf(f->server_key, sizeof(f->server_key), "%s/server.key", dir);
    snprintf(f->client_cert, sizeof(f->client_cert), "%s/client.pem", dir);
    snprintf(f->client_key, sizeof(f->client_key), "%s/client.key", dir);
    if (!it_file_write(cnf, cnf_text, strlen(cnf_text)))
        return false;
    return openssl(dir, "ca",
                   ARGV((char *)openssl_path(), "req", "-x509", "-config", cnf, "-extensions",
                        "ca_ext", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", ca_key, "-out", f->ca, "-days", "2", "-subj",
                        "/CN=ibus-it-ca")) &&
           leaf(dir, cnf, f->ca, ca_key, "server", "/CN=127.0.0.1", "server_ext", "2",
                f->server_cert, f->server_key) &&
           leaf(dir, cnf, f->ca, ca_key, "client", "/CN=ibus-it-client", "client_ext", "3",
                f->client_cert, f->client_key);
}
