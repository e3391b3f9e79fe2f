/* The fair write turn of a marker file (sqlite_turn.h says why and how). */
#include "sqlite_turn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "recorder_internal.h"

#define GATE_BYTE 0
#define WRITER_BYTE 1
/* How often a wait wakes to look at its deadline: the timer may fire
 * just before the thread blocks, so it keeps firing until the wait ends. */
#define TICK_NS (20 * 1000 * 1000)

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int wake_signal;
static bool handler_ok;

static void on_wake(int sig)
{
    (void)sig;
}

/* No SA_RESTART: the signal must end a blocked fcntl with EINTR. */
static void install_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_wake;
    sigemptyset(&sa.sa_mask);
    wake_signal = SIGRTMIN + 4;
    handler_ok = sigaction(wake_signal, &sa, NULL) == 0;
}

void ib__sq_turn_init(sq_turn *t)
{
    memset(t, 0, sizeof(*t));
    t->fd = -1;
}

ib_status ib__sq_turn_open(sq_turn *t, const char *db_path, const char *name, unsigned mode,
                           ib_error *err)
{
    char path[IB__RECORDER_PATH_MAX + 8];
    ib__sq_turn_init(t);
    snprintf(path, sizeof(path), "%s-lock", db_path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
    /* a file created now may have lost bits to the umask */
    if (fd >= 0 && fchmod(fd, (mode_t)mode) != 0) {
        close(fd);
        fd = -1;
    } else if (fd < 0 && errno == EEXIST) {
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd < 0)
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot open its lock file %s: %s", name,
                            path, strerror(errno));
    t->fd = fd;
    pthread_once(&handler_once, install_handler);
    return IB_OK;
}

static int lock_byte(int fd, int cmd, short type, off_t byte)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = byte;
    fl.l_len = 1;
    return fcntl(fd, cmd, &fl) == 0 ? 0 : errno;
}

/* A timer that sends wake_signal to this thread every TICK_NS. */
static int arm_timer(timer_t *timer)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = wake_signal;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &sev, timer) != 0)
        return errno;
    struct itimerspec its = {.it_value = {0, TICK_NS}, .it_interval = {0, TICK_NS}};
    if (timer_settime(*timer, 0, &its, NULL) != 0) {
        int e = errno;
        timer_delete(*timer);
        return e;
    }
    return 0;
}

/* Waits for `byte` until `deadline_ns` on the monotonic clock. */
static int wait_byte(int fd, off_t byte, int64_t deadline_ns)
{
    int rc = lock_byte(fd, F_OFD_SETLK, F_WRLCK, byte);
    if (rc != EAGAIN && rc != EACCES)
        return rc;
    if (!handler_ok)
        return ENOTSUP;
    timer_t timer;
    sigset_t wake, old;
    sigemptyset(&wake);
    sigaddset(&wake, wake_signal);
    if ((rc = arm_timer(&timer)) != 0)
        return rc;
    pthread_sigmask(SIG_UNBLOCK, &wake, &old);
    for (;;) {
        rc = lock_byte(fd, F_OFD_SETLKW, F_WRLCK, byte);
        if (rc != EINTR)
            break;
        if (ib_clock_monotonic_ns() >= deadline_ns) {
            rc = ETIMEDOUT;
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    timer_delete(timer);
    return rc;
}

int ib__sq_turn_take(sq_turn *t, int64_t timeout_ms)
{
    if (t->fd < 0 || t->held) {
        t->last_wait_ns = 0;
        t->held = true;
        return 0;
    }
    int64_t start = ib_clock_monotonic_ns();
    int64_t deadline = start + timeout_ms * 1000000;
    int rc = wait_byte(t->fd, GATE_BYTE, deadline);
    if (rc != 0)
        return rc;
    rc = wait_byte(t->fd, WRITER_BYTE, deadline);
    lock_byte(t->fd, F_OFD_SETLK, F_UNLCK, GATE_BYTE);
    if (rc != 0)
        return rc;
    t->held = true;
    t->last_wait_ns = ib_clock_monotonic_ns() - start;
    if (t->last_wait_ns > 1000000)
        t->waits++;
    if (t->last_wait_ns > t->max_wait_ns)
        t->max_wait_ns = t->last_wait_ns;
    return 0;
}

void ib__sq_turn_give(sq_turn *t)
{
    if (!t->held)
        return;
    t->held = false;
    if (t->fd >= 0)
        lock_byte(t->fd, F_OFD_SETLK, F_UNLCK, WRITER_BYTE);
}

int ib__sq_turn_hold_slot(sq_turn *t, int64_t slot)
{
    return t->fd < 0 ? 0 : lock_byte(t->fd, F_OFD_SETLK, F_RDLCK, (off_t)slot);
}

bool ib__sq_turn_slot_held(const sq_turn *t, int64_t slot)
{
    if (t->fd < 0)
        return true;
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)slot;
    fl.l_len = 1;
    if (fcntl(t->fd, F_OFD_GETLK, &fl) != 0)
        return true;
    return fl.l_type != F_UNLCK;
}

void ib__sq_turn_close(sq_turn *t)
{
    ib__sq_turn_give(t);
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
}
