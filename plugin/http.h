/* Health and metrics HTTP endpoint (`ibus run --http ADDR`), on libmicrohttpd.
 *
 *   GET /healthz  200 "ok"            the process is alive and serving
 *   GET /readyz   200 "ready" when ready(ctx) returns non-zero, else 503
 *   GET /metrics  200, Prometheus text format 0.0.4 of the registry
 *   other paths   404; methods other than GET and HEAD: 405
 *
 * One internal thread serves every request (a scrape is a short render);
 * connections are capped and idle ones time out, so a slow or hostile client
 * cannot tie up the process.
 */
#ifndef IB_HTTP_H
#define IB_HTTP_H

#include <stdint.h>

#include "error.h"
#include "metrics.h"

typedef struct ib_http ib_http;

/* Readiness probe callback. Called on the server thread for each /readyz
 * request: must be thread-safe and must not block (read atomics). */
typedef int (*ib_http_ready_fn)(void *ctx);

/* Starts serving on `addr`:
 *   "127.0.0.1:9090"  one IPv4 address
 *   "[::1]:9090"      one IPv6 address
 *   "localhost:9090"  same as 127.0.0.1
 *   ":9090"           every IPv4 interface (0.0.0.0); only for a pod or a
 *                     host whose firewall you control: /metrics is unauthenticated
 * Addresses are numeric (no DNS). Port 0 picks a free port: read it with
 * ib_http_port().
 * `m` (BORROWED; must outlive the server) may be NULL: /metrics then answers
 * 503. `ready` may be NULL: /readyz then always answers 200.
 * Errors: IB_ERR_CONFIG when `addr` is malformed (message names --http),
 * IB_ERR_IO when the socket cannot be bound (in use, not a local address),
 * IB_ERR_NOMEM. On error *out is NULL. Stop with ib_http_stop(). */
ib_status ib_http_start(ib_http **out, const char *addr, ib_metrics *m, ib_http_ready_fn ready,
                        void *ctx, ib_error *err);

/* The port the server listens on (the one picked when 0 was asked). */
uint16_t ib_http_port(const ib_http *h);

/* Stops the server: waits for a request in progress to finish, closes the
 * socket and frees everything. No-op on NULL. After it returns, `ready` is
 * never called again. */
void ib_http_stop(ib_http *h);

#endif
