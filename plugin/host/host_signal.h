/* SPDX-License-Identifier: Apache-2.0 */
/* The stop signal of `ibus run`: SIGTERM and SIGINT set one flag that the
 * main loop and the control thread read, and wakes the control loop. Its own module so that neither
 * of them owns what the other reads; it also starts the host's threads, with every signal blocked,
 * so signals stay with the main thread. */
#ifndef IB_HOST_SIGNAL_H
#define IB_HOST_SIGNAL_H

#include <pthread.h>
#include <stdbool.h>

/* Installs the SIGTERM/SIGINT handler that sets the flag, and ignores
 * SIGPIPE (a peer closing a socket must not kill the process). Call once,
 * from the main thread, before any other thread starts. */
void ib__host_signal_install(void);

/* A pipe the handler writes one byte to after setting the flag, so a
 * loop polling it wakes at once (the control loop's); -1 for none. Main
 * thread (signals are handled there, so the handler never races it). */
void ib__host_signal_wake_fd(int fd);

/* Whether SIGTERM or SIGINT has arrived. Safe from any thread. */
bool ib__host_signal_received(void);

/* The flag itself, for waits that poll a stop flag
 * (ib_nats_wait_connected); valid for the life of the process. */
const volatile int *ib__host_signal_flag(void);

/* Starts `fn(arg)` on a new thread that has every signal blocked, so
 * signals stay with the main thread. Returns pthread_create's result. */
int ib__host_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
