/* SPDX-License-Identifier: Apache-2.0 */
#include "it_server.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "it_files.h"
#include "it_tls.h"

/* How long a server may take to write its ports file, and to stop. */
#define START_DEADLINE_MS 30000
#define STOP_DEADLINE_MS 15000

const char *it_nats_server_path(void)
{
#ifdef IT_NATS_SERVER
    if (access(IT_NATS_SERVER, X_OK) == 0)
        return IT_NATS_SERVER;
#endif
    static char found[PATH_MAX];
    const char *path = getenv("PATH");
    if (path == NULL)
        return NULL;
    char *copy = strdup(path), *save = NULL;
    const char *result = NULL;
    for (char *d = copy != NULL ? strtok_r(copy, ":", &save) : NULL; d != NULL && result == NULL;
         d = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof(found), "%s/nats-server", d);
        if (access(found, X_OK) == 0)
            result = found;
    }
    free(copy);
    return result;
}

/* Quotes a value for the server's config syntax (no quotes or backslashes
 * occur in our values; refuse them rather than escape). */
static bool conf_value_ok(const char *v)
{
    return strpbrk(v, "\"\\\n") == NULL;
}

static bool write_config(it_server *s, const char *users)
{
    char text[32768];
    size_t n = 0;
    it_tls_files tls;

    if (s->token[0] == '\0' && s->user[0] == '\0' && !s->tls && s->extra[0] == '\0') {
        s->conf[0] = '\0';
        return true;
    }
    if (s->token[0] != '\0') {
        if (!conf_value_ok(s->token))
            return false;
        n += (size_t)snprintf(text + n, sizeof(text) - n, "authorization {\n  token: \"%s\"\n}\n",
                              s->token);
    } else if (s->user[0] != '\0') {
        if (!conf_value_ok(s->user) || !conf_value_ok(s->password))
            return false;
        if (s->nkey[0] != '\0' && !conf_value_ok(s->nkey))
            return false;
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "authorization {\n  users: [\n    {user: \"%s\", password: \"%s\"}\n",
                              s->user, s->password);
        if (s->nkey[0] != '\0')
            n += (size_t)snprintf(text + n, sizeof(text) - n, "    {nkey: \"%s\"}\n", s->nkey);
        if (users != NULL)
            n += (size_t)snprintf(text + n, sizeof(text) - n, "%s\n", users);
        n += (size_t)snprintf(text + n, sizeof(text) - n, "  ]\n}\n");
    }
    if (s->tls) {
        char tls_dir[PATH_MAX];
        it_join(tls_dir, sizeof(tls_dir), s->dir, "tls");
        if (!it_tls_make(&tls, tls_dir))
            return false;
        snprintf(s->ca, sizeof(s->ca), "%s", tls.ca);
        snprintf(s->client_cert, sizeof(s->client_cert), "%s", tls.client_cert);
        snprintf(s->client_key, sizeof(s->client_key), "%s", tls.client_key);
        /* A generous handshake timeout: the clients may run under ASan. */
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "tls {\n  cert_file: \"%s\"\n  key_file: \"%s\"\n  ca_file: \"%s\"\n"
                              "  verify: true\n  timeout: 10\n}\n",
                              tls.server_cert, tls.server_key, tls.ca);
    }
    if (s->extra[0] != '\0' && n < sizeof(text))
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s\n", s->extra);
    if (n >= sizeof(text))
        return false;
    it_join(s->conf, sizeof(s->conf), s->dir, "nats.conf");
    return it_file_write(s->conf, text, n);
}

/* The server names its ports file "<exe>_<pid>.ports". */
static bool read_port(it_server *s)
{
    char suffix[64];
    snprintf(suffix, sizeof(suffix), "_%ld.ports", (long)s->proc.pid);
    DIR *d = opendir(s->ports_dir);
    if (d == NULL)
        return false;
    char path[PATH_MAX] = "";
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len > sl && strcmp(e->d_name + len - sl, suffix) == 0) {
            it_join(path, sizeof(path), s->ports_dir, e->d_name);
            break;
        }
    }
    closedir(d);
    if (path[0] == '\0')
        return false;
    /* {"nats":["nats://127.0.0.1:PORT"]}: the number after 127.0.0.1: */
    char *text = it_file_read(NULL, path);
    if (text == NULL)
        return false;
    const char *at = strstr(text, "127.0.0.1:");
    int port = at != NULL ? atoi(at + strlen("127.0.0.1:")) : 0;
    free(text);
    if (port <= 0)
        return false;
    s->port = port;
    return true;
}

static bool launch(it_server *s)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", s->port > 0 ? s->port : -1);
    const char *exe = it_nats_server_path();
    if (exe == NULL) {
        fprintf(stderr, "it_server: nats-server not found\n");
        return false;
    }
    char *argv[16];
    int a = 0;
    argv[a++] = (char *)exe;
    argv[a++] = "-js";
    argv[a++] = "-a";
    argv[a++] = "127.0.0.1";
    argv[a++] = "-p";
    argv[a++] = port;
    argv[a++] = "-sd";
    argv[a++] = s->store;
    argv[a++] = "--ports_file_dir";
    argv[a++] = s->ports_dir;
    if (s->conf[0] != '\0') {
        argv[a++] = "-c";
        argv[a++] = s->conf;
    }
    argv[a] = NULL;
    if (!it_proc_spawn(&s->proc, s->dir, "nats-server", NULL, argv))
        return false;
    int64_t deadline = it_now_ms() + START_DEADLINE_MS;
    while (!read_port(s)) {
        if (!it_proc_running(&s->proc)) {
            fprintf(stderr, "it_server: nats-server exited with status %d\n", s->proc.status);
            it_dump_logs(s->dir, 30);
            return false;
        }
        if (it_now_ms() >= deadline) {
            fprintf(stderr, "it_server: no ports file after %d ms\n", START_DEADLINE_MS);
            it_proc_stop(&s->proc, SIGKILL, 1000);
            return false;
        }
        it_sleep_ms(20);
    }
    snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%d", s->tls ? "tls" : "nats", s->port);
    return true;
}

bool it_server_start(it_server *s, const char *dir, const it_server_opts *o)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    it_join(s->store, sizeof(s->store), dir, "js");
    it_join(s->ports_dir, sizeof(s->ports_dir), dir, "ports");
    mkdir(s->ports_dir, 0700);
    if (o != NULL) {
        snprintf(s->token, sizeof(s->token), "%s", o->token != NULL ? o->token : "");
        snprintf(s->user, sizeof(s->user), "%s", o->user != NULL ? o->user : "");
        snprintf(s->password, sizeof(s->password), "%s", o->password != NULL ? o->password : "");
        snprintf(s->nkey, sizeof(s->nkey), "%s", o->nkey != NULL ? o->nkey : "");
        s->tls = o->tls;
        if (o->extra != NULL &&
            snprintf(s->extra, sizeof(s->extra), "%s", o->extra) >= (int)sizeof(s->extra)) {
            fprintf(stderr, "it_server: the extra configuration is too long\n");
            return false;
        }
    }
    if (!write_config(s, o != NULL ? o->users : NULL)) {
        fprintf(stderr, "it_server: cannot write the server configuration\n");
        return false;
    }
    return launch(s);
}

/* Ends the server with `sig` (SIGKILL after the deadline) and forgets its
 * ports file; the status says whether `sig` sufficed. */
static int stop_with(it_server *s, int sig)
{
    if (s->proc.pid == 0)
        return 0;
    int st = it_proc_stop(&s->proc, sig, STOP_DEADLINE_MS);
    /* Remove the old ports file so a restart reads the new one. */
    char suffix_path[PATH_MAX];
    DIR *d = opendir(s->ports_dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".ports") != NULL) {
            it_join(suffix_path, sizeof(suffix_path), s->ports_dir, e->d_name);
            unlink(suffix_path);
        }
    if (d != NULL)
        closedir(d);
    return st;
}

bool it_server_stop(it_server *s)
{
    return stop_with(s, SIGTERM) != -SIGKILL;
}

bool it_server_kill(it_server *s)
{
    stop_with(s, SIGKILL);
    return s->proc.pid == 0;
}

bool it_server_restart(it_server *s)
{
    it_server_stop(s);
    /* The port was ours a moment ago; retry briefly in case the kernel
     * still holds it. */
    for (int attempt = 0; attempt < 20; attempt++) {
        if (launch(s))
            return true;
        it_sleep_ms(250);
    }
    return false;
}

static natsStatus connect_with(natsConnection **out, const it_server *s, const char *user,
                               const char *password, const char *token, bool forever)
{
    natsOptions *o = NULL;
    natsStatus st = natsOptions_Create(&o);
    if (st == NATS_OK)
        st = natsOptions_SetURL(o, s->url);
    if (st == NATS_OK)
        st = natsOptions_SetTimeout(o, 10000);
    if (st == NATS_OK && forever) {
        natsOptions_SetMaxReconnect(o, -1);
        natsOptions_SetReconnectWait(o, 100);
    }
    if (st == NATS_OK && token != NULL && token[0] != '\0')
        st = natsOptions_SetToken(o, token);
    if (st == NATS_OK && user != NULL && user[0] != '\0')
        st = natsOptions_SetUserInfo(o, user, password != NULL ? password : "");
    if (st == NATS_OK && s->tls) {
        st = natsOptions_SetSecure(o, true);
        if (st == NATS_OK)
            st = natsOptions_LoadCATrustedCertificates(o, s->ca);
        if (st == NATS_OK)
            st = natsOptions_LoadCertificatesChain(o, s->client_cert, s->client_key);
    }
    if (st == NATS_OK)
        st = natsConnection_Connect(out, o);
    natsOptions_Destroy(o);
    return st;
}

natsStatus it_server_connect_as(natsConnection **out, const it_server *s, const char *user,
                                const char *password, const char *token)
{
    *out = NULL;
    return connect_with(out, s, user, password, token, false);
}

natsConnection *it_server_client(it_server *s)
{
    if (s->nc == NULL) {
        natsStatus st = connect_with(&s->nc, s, s->user, s->password, s->token, true);
        if (st != NATS_OK) {
            fprintf(stderr, "it_server: cannot connect to %s: %s\n", s->url,
                    natsStatus_GetText(st));
            s->nc = NULL;
            return NULL;
        }
    }
    return s->nc;
}

jsCtx *it_server_js(it_server *s)
{
    if (s->js == NULL) {
        natsConnection *nc = it_server_client(s);
        if (nc == NULL || natsConnection_JetStream(&s->js, nc, NULL) != NATS_OK)
            s->js = NULL;
    }
    return s->js;
}

void it_server_free(it_server *s)
{
    jsCtx_Destroy(s->js);
    s->js = NULL;
    if (s->nc != NULL) {
        natsConnection_Close(s->nc);
        natsConnection_Destroy(s->nc);
        s->nc = NULL;
    }
    it_server_stop(s);
}
