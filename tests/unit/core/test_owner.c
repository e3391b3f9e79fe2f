/* SPDX-License-Identifier: Apache-2.0 */
/* Owner tokens: unique per incarnation, and the liveness probe that lets a
 * process take over at once the claims of a holder proven gone. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ib_test.h"
#include "owner.h"

static void tokens_are_unique_and_bounded(void **state)
{
    (void)state;
    char a[IB_OWNER_TOKEN_MAX], b[IB_OWNER_TOKEN_MAX];
    assert_int_equal(ib_owner_make(a, sizeof(a), "orders@pod-0", NULL), IB_OK);
    assert_int_equal(ib_owner_make(b, sizeof(b), "orders@pod-0", NULL), IB_OK);
    /* same label, same process: still two owners */
    assert_string_not_equal(a, b);
    assert_true(strncmp(a, "orders@pod-0/", 13) == 0);
    /* '/' in a label cannot break the token's fields, long labels are cut */
    char lab[200];
    memset(lab, 'x', sizeof(lab) - 1);
    lab[sizeof(lab) - 1] = '\0';
    lab[3] = '/';
    assert_int_equal(ib_owner_make(a, sizeof(a), lab, NULL), IB_OK);
    assert_true(strlen(a) < IB_OWNER_TOKEN_MAX);
    assert_int_equal(ib_owner_liveness_of(a, true), IB_OWNER_ALIVE);
    /* too small a buffer is refused */
    ib_error err;
    assert_int_equal(ib_owner_make(a, 16, "x", &err), IB_ERR_INVALID_ARG);
}

static void this_process_is_alive(void **state)
{
    (void)state;
    char t[IB_OWNER_TOKEN_MAX];
    assert_int_equal(ib_owner_make(t, sizeof(t), "me", NULL), IB_OK);
    assert_int_equal(ib_owner_liveness_of(t, true), IB_OWNER_ALIVE);
    assert_int_equal(ib_owner_liveness_of(t, false), IB_OWNER_ALIVE);
}

/* A child makes a token and exits: once reaped, it is provably gone. */
static void exited_process_is_gone(void **state)
{
    (void)state;
    int fds[2];
    char t[IB_OWNER_TOKEN_MAX] = "";
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c[IB_OWNER_TOKEN_MAX];
        if (ib_owner_make(c, sizeof(c), "child", NULL) != IB_OK)
            _exit(1);
        ssize_t w = write(fds[1], c, strlen(c) + 1);
        _exit(w > 0 ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], t, sizeof(t));
    close(fds[0]);
    assert_true(n > 0);
    assert_int_equal(ib_owner_liveness_of(t, true), IB_OWNER_ALIVE); /* maybe a zombie */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(ib_owner_liveness_of(t, true), IB_OWNER_GONE);
    assert_int_equal(ib_owner_liveness_of(t, false), IB_OWNER_GONE);
}

/* Tokens whose facts cannot be checked from here are never "gone". */
static void foreign_tokens_are_unknown(void **state)
{
    (void)state;
    char t[IB_OWNER_TOKEN_MAX], other[256];
    assert_int_equal(ib_owner_make(t, sizeof(t), "me", NULL), IB_OK);
    static const char *const bad[] = {
        "",
        "orders@host:1234",
        "a/b/c",
        "x/0123456789abcdef0123456789abcdef/1/1/1",
        "x/short/1/2/3/4",
        "x/0123456789abcdef0123456789abcdef/1/-5/2/ab",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(ib_owner_liveness_of(bad[i], true), IB_OWNER_UNKNOWN);
    assert_int_equal(ib_owner_liveness_of(NULL, true), IB_OWNER_UNKNOWN);

    /* label/boot/pidns/pid/start/random: change one field at a time */
    char label[64], boot[64], rnd[32];
    unsigned long long ns, start;
    long pid;
    assert_int_equal(
        sscanf(t, "%63[^/]/%63[^/]/%llu/%ld/%llu/%31s", label, boot, &ns, &pid, &start, rnd), 6);
    /* another boot of the kernel: gone on a one-host store, else unknown */
    snprintf(other, sizeof(other), "%s/%s/%llu/%ld/%llu/%s", label,
             "ffffffffffffffffffffffffffffffff", ns, pid, start, rnd);
    assert_int_equal(ib_owner_liveness_of(other, true), IB_OWNER_GONE);
    assert_int_equal(ib_owner_liveness_of(other, false), IB_OWNER_UNKNOWN);
    /* another PID namespace (another container): unknown */
    snprintf(other, sizeof(other), "%s/%s/%llu/%ld/%llu/%s", label, boot, ns + 1, pid, start, rnd);
    assert_int_equal(ib_owner_liveness_of(other, true), IB_OWNER_UNKNOWN);
    /* our PID, but a process that started at another time: a reused PID */
    snprintf(other, sizeof(other), "%s/%s/%llu/%ld/%llu/%s", label, boot, ns, pid, start + 1, rnd);
    assert_int_equal(ib_owner_liveness_of(other, true), IB_OWNER_GONE);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(tokens_are_unique_and_bounded),
    cmocka_unit_test(this_process_is_alive),
    cmocka_unit_test(exited_process_is_gone),
    cmocka_unit_test(foreign_tokens_are_unknown),
};

IB_TEST_MAIN(tests)
