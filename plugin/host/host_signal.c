/* SPDX-License-Identifier: Apache-2.0 */
/* The stop flag set by SIGTERM/SIGINT (host_signal.h). */
#include "host_signal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* Waits poll it through a `const volatile int *`: glibc's sig_atomic_t is
 * an int, and the assertion keeps that cast honest. */
_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "sig_atomic_t is read as an int");
static volatile sig_atomic_t signalled = 0;
/* The control loop's wake-up pipe, or -1. */
static volatile sig_atomic_t wake_fd = -1;

static void on_signal(int sig)
{
    (void)sig;
    signalled = 1;
    int fd = wake_fd;
    if (fd >= 0) {
        int saved = errno;
        char one = 1;
        (void)!write(fd, &one, 1);
        errno = saved;
    }
}

void ib__host_signal_wake_fd(int fd)
{
    wake_fd = fd;
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
