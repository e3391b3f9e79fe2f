/* The NATS connection of an ibus process: options, credentials, TLS,
 * reconnect policy and connection-state tracking.
 *
 * nats.c's default reconnect policy gives up after 60 attempts (about two
 * minutes) and then closes the connection for good; a worker must outlive
 * any server restart, so we reconnect forever with jitter, and report a
 * closed connection through ib_nats_closed() so the host can exit non-zero
 * and let its supervisor restart it. */
#ifndef IB_NATS_CONN_H
#define IB_NATS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>

#include "error.h"

typedef struct ib_nats_config {
    const char *url;            /* comma-separated server URLs */
    const char *name;           /* connection name shown by the server */
    const char *creds_file;     /* JWT + seed credentials file */
    const char *nkey_seed_file; /* NKey seed file (public key is derived) */
    const char *token;
    const char *user;
    const char *password;
    const char *tls_ca;   /* CA bundle; implies TLS */
    const char *tls_cert; /* client certificate chain; needs tls_key */
    const char *tls_key;
    int64_t connect_timeout_ms; /* per attempt; 0 = 2000 */
    int64_t reconnect_wait_ms;  /* 0 = 250 */
    bool retry_initial_connect; /* keep trying in the background if the server is not up yet */
} ib_nats_config;

typedef struct ib_nats ib_nats;

/* Connects (or, with retry_initial_connect, starts connecting) and creates
 * a JetStream context. `*out` is owned by the caller; ib_nats_close()
 * flushes and frees it. Errors: IB_ERR_CONFIG for unusable credentials or
 * TLS files (the message names the option), IB_ERR_NATS when the server
 * cannot be reached. */
ib_status ib_nats_connect(ib_nats **out, const ib_nats_config *config, ib_error *err);

/* Borrowed handles, valid until ib_nats_close(). */
natsConnection *ib_nats_connection(ib_nats *n);
jsCtx *ib_nats_jetstream(ib_nats *n);

/* Connection state, safe from any thread. */
bool ib_nats_is_connected(const ib_nats *n);
bool ib_nats_is_closed(const ib_nats *n);
uint64_t ib_nats_reconnects(const ib_nats *n);

/* Waits until connected, closed, `*stop` becomes true or `timeout_ms`
 * passes (<0 = forever). Returns true when connected. */
bool ib_nats_wait_connected(ib_nats *n, const volatile int *stop, int64_t timeout_ms);

/* Why the connection last failed, in nats.c's words (for example
 * "Authorization Violation"), copied into `buf`; "" when it reports none.
 * Meant for the message of a process that gives up because the connection
 * was closed for good. Returns `buf`. */
const char *ib_nats_last_error(ib_nats *n, char *buf, size_t len);

/* Flushes pending publishes (acks) with a timeout, drains and frees.
 * NULL is a no-op. */
void ib_nats_close(ib_nats *n, int64_t flush_timeout_ms);

/* Describes a nats.c status with the library's last error text, for error
 * messages: "<status text>: <detail>". Returns `buf`. */
const char *ib_nats_strerror(char *buf, size_t len, natsStatus s);

#endif
