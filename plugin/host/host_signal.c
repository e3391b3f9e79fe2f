/* SPDX-License-Identifier: Apache-2.0 */
/* The stop flag set by SIGTERM/SIGINT (host_signal.h). */
#include "host_signal.h"

#include <signal.h>
#include <string.h>

/* Waits poll it through a `const volatile int *`: glibc's sig_atomic_t is
 * an int, and the assertion keeps that cast honest. */
_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "sig_atomic_t is read as an int");
static volatile sig_atomic_t signalled = 0;

static void on_signal(int sig)
{
    (void)sig;
    signalled = 1;
}

void ib__host_signal_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

bool ib__host_signal_received(void)
{
    return signalled != 0;
}

const volatile int *ib__host_signal_flag(void)
{
    return (const volatile int *)&signalled;
}

int ib__host_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    /* the new thread inherits the mask: signals stay with the main thread */
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
