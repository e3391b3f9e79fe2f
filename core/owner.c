/* SPDX-License-Identifier: Apache-2.0 */
/* Owner tokens and the liveness probe (owner.h). */
#include "owner.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define BOOT_ID_HEX 32
#define LABEL_MAX 40

/* What this process is, read once. */
typedef struct self_facts {
    char boot[BOOT_ID_HEX + 1]; /* "" when unknown */
    unsigned long long pidns;   /* 0 when unknown */
} self_facts;

static self_facts self;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

/* Reads a small file whole; returns the length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static void read_self(void)
{
    char raw[64];
    size_t k = 0;
    if (read_small("/proc/sys/kernel/random/boot_id", raw, sizeof(raw)) > 0) {
        for (const char *p = raw; *p != '\0' && k < BOOT_ID_HEX; p++)
            if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
                self.boot[k++] = *p;
    }
    self.boot[k == BOOT_ID_HEX ? k : 0] = '\0';
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        self.pidns = (unsigned long long)st.st_ino;
}

/* Start time of `pid` in clock ticks since boot (field 22 of its stat
 * file); 0 when the process does not exist. The command name (field 2)
 * may hold spaces and parentheses, so fields are counted from the last ')'. */
static unsigned long long start_time_of(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (read_small(path, buf, sizeof(buf)) <= 0)
        return 0;
    const char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    /* after ")": field 3 (state) is the first; field 22 is the 20th */
    p++;
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (p == NULL)
            return 0;
    }
    return strtoull(p + 1, NULL, 10);
}

ib_status ib_owner_make(char *out, size_t out_len, const char *label, ib_error *err)
{
    uint64_t rnd;
    char lab[LABEL_MAX + 1];
    size_t k = 0;

    pthread_once(&self_once, read_self);
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return ib_error_set(err, IB_ERR_IO, "owner token: no randomness: %s", strerror(errno));
    for (const char *p = label != NULL ? label : ""; *p != '\0' && k < LABEL_MAX; p++)
        lab[k++] = *p == '/' ? '_' : *p;
    lab[k] = '\0';
    long pid = (long)getpid();
    int n =
        snprintf(out, out_len, "%s/%s/%llu/%ld/%llu/%016" PRIx64, lab,
                 self.boot[0] != '\0' ? self.boot : "-", self.pidns, pid, start_time_of(pid), rnd);
    if (n < 0 || (size_t)n >= out_len)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "owner token: %zu bytes are too few", out_len);
    return IB_OK;
}

/* The parts of a token after its label. */
typedef struct token_facts {
    char boot[BOOT_ID_HEX + 1];
    unsigned long long pidns;
    long pid;
    unsigned long long start;
} token_facts;

static bool parse_token(token_facts *t, const char *token)
{
    /* The label may hold anything but '/', so take the last five parts. */
    const char *slash[5];
    int found = 0;
    for (const char *p = token + strlen(token); p > token && found < 5;) {
        p--;
        if (*p == '/')
            slash[found++] = p;
    }
    if (found < 5)
        return false;
    const char *boot = slash[4] + 1;
    size_t boot_len = (size_t)(slash[3] - boot);
    if (boot_len != BOOT_ID_HEX)
        return false;
    memcpy(t->boot, boot, BOOT_ID_HEX);
    t->boot[BOOT_ID_HEX] = '\0';
    char *end;
    t->pidns = strtoull(slash[3] + 1, &end, 10);
    if (end != slash[2])
        return false;
    t->pid = strtol(slash[2] + 1, &end, 10);
    if (end != slash[1] || t->pid <= 0)
        return false;
    t->start = strtoull(slash[1] + 1, &end, 10);
    return end == slash[0] && t->start != 0;
}

ib_owner_liveness ib_owner_liveness_of(const char *token, bool host_local)
{
    token_facts t;
    pthread_once(&self_once, read_self);
    if (token == NULL || !parse_token(&t, token) || self.boot[0] == '\0' || self.pidns == 0)
        return IB_OWNER_UNKNOWN;
    if (strcmp(t.boot, self.boot) != 0)
        return host_local ? IB_OWNER_GONE : IB_OWNER_UNKNOWN;
    /* Same kernel boot. PIDs are only comparable inside one namespace. */
    if (t.pidns != self.pidns)
        return IB_OWNER_UNKNOWN;
    unsigned long long now_start = start_time_of(t.pid);
    /* Not there, or the PID now belongs to a later process. */
    return now_start == t.start ? IB_OWNER_ALIVE : IB_OWNER_GONE;
}
