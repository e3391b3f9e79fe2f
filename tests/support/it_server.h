/* SPDX-License-Identifier: Apache-2.0 */
/* A real nats-server with JetStream for one integration test.
 *
 * Started as `nats-server -js -a 127.0.0.1 -p -1 -sd <dir>/js
 * --ports_file_dir <dir>/ports [-c <dir>/nats.conf]`: the server picks a
 * free loopback port and writes it to its ports file, which we wait for.
 * Optionally the generated config requires a token, a user and password,
 * or TLS with client certificates (a CA, server and client certificates
 * made with the openssl command in <dir>/tls). A restart reuses the port
 * and the store directory, so streams and consumers survive it.
 *
 * The struct also caches one client connection of the test itself
 * (it_server_client), made with the same credentials. */
#ifndef IB_IT_SERVER_H
#define IB_IT_SERVER_H

#include <limits.h>
#include <stdbool.h>

#include <nats/nats.h>

#include "it_proc.h"

typedef struct it_server_opts {
    const char *token; /* require this token (NULL = no) */
    const char *user;  /* require this user and password (NULL = no) */
    const char *password;
    const char *nkey; /* with user: also admit this NKey user (public key) */
    /* with user: more entries of the users list, as server config text
     * ("{user: w, password: p, permissions: {...}}"): users with their
     * own permissions beside the test's own, which may do anything */
    const char *users;
    bool tls; /* TLS only, client certificates required */
    /* more server config text, as it is (e.g. "mappings = {...}"); NULL = none */
    const char *extra;
} it_server_opts;

typedef struct it_server {
    char dir[PATH_MAX];
    char store[PATH_MAX];
    char ports_dir[PATH_MAX];
    char conf[PATH_MAX]; /* "" without a config file */
    char token[128], user[64], password[64], nkey[64];
    bool tls;
    char extra[4096]; /* it_server_opts.extra, kept for a restart */
    char ca[PATH_MAX], client_cert[PATH_MAX], client_key[PATH_MAX]; /* with tls */
    int port;
    char url[160]; /* nats://127.0.0.1:PORT or tls://127.0.0.1:PORT */
    it_proc proc;
    natsConnection *nc; /* the test's own connection; see it_server_client */
    jsCtx *js;
} it_server;

/* Path of the nats-server binary (from the build configuration, else
 * PATH); NULL if none was found. */
const char *it_nats_server_path(void);

/* Writes the config (and with tls, makes the certificates), starts the
 * server under `dir` and waits until its ports file names the port.
 * Returns false, with the reason on stderr, when any step fails. */
bool it_server_start(it_server *s, const char *dir, const it_server_opts *opts);

/* Stops the server: SIGTERM, then SIGKILL after a deadline. The cached
 * client connection is kept (it reconnects after a restart). */
bool it_server_stop(it_server *s);

/* Kills the server with SIGKILL, as a crash would: no 409 "Server
 * Shutdown", no goodbye to its clients. True once it is gone. */
bool it_server_kill(it_server *s);

/* Starts the server again on the same port with the same store (after
 * stopping it with SIGTERM if it still runs). */
bool it_server_restart(it_server *s);

/* Stops the server and closes the cached client connection. */
void it_server_free(it_server *s);

/* The test's own connection (made on first use, with the server's
 * credentials, reconnecting forever) and its JetStream context; NULL when
 * it cannot connect. Borrowed: valid until it_server_free. */
natsConnection *it_server_client(it_server *s);
jsCtx *it_server_js(it_server *s);

/* Makes a fresh connection with explicit credentials (NULL = none), for
 * tests of refused logins; the caller closes and destroys it. Returns the
 * nats.c status. */
natsStatus it_server_connect_as(natsConnection **out, const it_server *s, const char *user,
                                const char *password, const char *token);

#endif
