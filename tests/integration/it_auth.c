/* SPDX-License-Identifier: Apache-2.0 */
/* Credentials: a server requiring a token, a user and password, or TLS
 * with client certificates (made with openssl by the test); and a wrong
 * password, which must end `ibus run` with exit 1 and a clear message
 * instead of retrying forever. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "nkey.h"

/* Runs one host against the env's server with its credentials, publishes
 * 20 events and checks each was handled once. */
static void round_trip(it_env *e, const char *durable)
{
    char audit[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 8], consumer[128];
    it_proc host;
    it_argv a;
    it_tally t;

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    it_argv_run(&a, e, durable);
    it_argv_plugin(&a, "audit", cfg);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(60000)));
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.paid", "--count", "20",
                                "--ids-file", it_path(ids, e, "ids.txt"), NULL),
                     0);
    assert_int_equal(it_wait_lines(audit, 20, it_timeout(60000)), 20);
    it_finish_hosts(e, durable, &host, 1, it_timeout(60000));
    snprintf(consumer, sizeof(consumer), "%s/audit/audit", durable);
    assert_true(it_tally_file(&t, audit, ids, consumer, NULL, 10));
    assert_int_equal(t.expected, 20);
    assert_int_equal(t.lines, 20);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
}

static void start_server(it_env *e, const it_server_opts *o)
{
    assert_true(it_server_start(&e->server, e->dir, o));
}

static void token_auth(void **state)
{
    it_env *e = *state;
    it_server_opts o = {.token = "it-token-5e3c1"};
    start_server(e, &o);
    /* the server really wants the token */
    natsConnection *nc = NULL;
    assert_int_not_equal(it_server_connect_as(&nc, &e->server, NULL, NULL, NULL), NATS_OK);
    natsConnection_Destroy(nc);
    assert_int_not_equal(it_server_connect_as(&nc, &e->server, NULL, NULL, "wrong-token"), NATS_OK);
    natsConnection_Destroy(nc);
    round_trip(e, "token");
    it_done(e);
}

static void user_password_auth(void **state)
{
    it_env *e = *state;
    it_server_opts o = {.user = "ibus", .password = "it-pass-92f0"};
    start_server(e, &o);
    natsConnection *nc = NULL;
    assert_int_not_equal(it_server_connect_as(&nc, &e->server, "ibus", "nope", NULL), NATS_OK);
    natsConnection_Destroy(nc);
    round_trip(e, "userpass");
    it_done(e);
}

/* Runs `ibus run` (or publish) with a wrong password: exit 1, promptly,
 * with a message that says authorization failed. */
static void expect_refused(it_env *e, const char *sub)
{
    it_argv a;
    it_proc p;
    it_server wrong = e->server;
    snprintf(wrong.password, sizeof(wrong.password), "%s", "wrong-password");
    wrong.nc = NULL;
    wrong.js = NULL;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), sub, NULL);
    it_argv_connect(&a, &wrong);
    if (strcmp(sub, "run") == 0) {
        char db[PATH_MAX];
        it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "markers.db"));
        it_argv_addl(&a, "--durable", "refused", "--log-format", "json", NULL);
        it_argv_plugin(&a, "scripted", NULL);
    } else {
        it_argv_addl(&a, "--type", "order.paid", "x", NULL);
    }
    assert_true(it_proc_spawn(&p, e->dir, sub, NULL, a.v));
    it_argv_free(&a);
    int st = it_proc_wait(&p, it_timeout(30000));
    if (st == IT_PROC_TIMEOUT) {
        it_proc_stop(&p, SIGKILL, 1000);
        fail_msg("ibus %s kept running with a wrong password", sub);
    }
    assert_int_equal(st, 1);
    char *err = it_file_read(NULL, p.err_path);
    assert_non_null(err);
    if (strcasestr(err, "authorization") == NULL)
        fail_msg("ibus %s: no clear message about the refused login: %s", sub, err);
    free(err);
}

static void wrong_password_exits_1(void **state)
{
    it_env *e = *state;
    it_server_opts o = {.user = "ibus", .password = "it-pass-92f0"};
    start_server(e, &o);
    expect_refused(e, "run");
    expect_refused(e, "publish");
    it_done(e);
}

static void tls_client_certificates(void **state)
{
    it_env *e = *state;
    it_server_opts o = {.tls = true};
    start_server(e, &o);
    assert_non_null(strstr(e->server.url, "tls://127.0.0.1:"));
    round_trip(e, "tls");

    /* without a client certificate the server refuses the handshake */
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "publish", "--nats-url", e->server.url, "--tls-ca", e->server.ca,
                 "--type", "order.paid", "x", NULL);
    int st = it_proc_run(NULL, e->dir, "publish-nocert", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    assert_int_equal(st, 1);
    it_done(e);
}

/* An NKey user: ibus derives the public key from the seed file and signs
 * the server's nonce; a seed the server does not know is refused. */
static void write_seed(char path[PATH_MAX], it_env *e, const char *name, uint8_t fill)
{
    uint8_t raw[32];
    char seed[59];
    memset(raw, fill, sizeof(raw));
    raw[0] = (uint8_t)(fill ^ 0x5a);
    ib_nkey_encode_user_seed(seed, raw);
    it_path(path, e, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", seed);
    fclose(f);
}

static void nkey_auth(void **state)
{
    it_env *e = *state;
    char seed_file[PATH_MAX], other_seed[PATH_MAX], pub[IB_NKEY_PUBLIC_LEN + 1];
    char audit[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 8], path[PATH_MAX];
    it_argv a;
    it_proc host;
    it_tally t;

    write_seed(seed_file, e, "user.nk", 0x21);
    write_seed(other_seed, e, "other.nk", 0x42);
    assert_int_equal(ib_nkey_public_from_seed_file(pub, seed_file, NULL), IB_OK);
    /* the harness and publisher log in with a password, ibus run with the NKey */
    it_server_opts o = {.user = "harness", .password = "it-pass-77aa", .nkey = pub};
    start_server(e, &o);
    it_server nk = e->server;
    nk.user[0] = nk.password[0] = '\0';
    nk.nc = NULL;
    nk.js = NULL;

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--nkey", seed_file, NULL);
    it_argv_connect(&a, &nk);
    it_argv_addl(&a, "--create", "--stream", IT_STREAM, "--stream-subjects", IT_SUBJECTS,
                 "--durable", "nkey", "--log-format", "json", NULL);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(path, e, "markers.db"));
    it_argv_addf(&a, "--summary-file=%s", it_path(path, e, "summary.jsonl"));
    it_argv_plugin(&a, "audit", cfg);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "nkey", it_timeout(60000)));
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.paid", "--count", "20",
                                "--ids-file", it_path(ids, e, "ids.txt"), NULL),
                     0);
    assert_int_equal(it_wait_lines(audit, 20, it_timeout(60000)), 20);
    it_finish_hosts(e, "nkey", &host, 1, it_timeout(60000));
    assert_true(it_tally_file(&t, audit, ids, "nkey/audit/audit", NULL, 10));
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);

    /* a seed the server does not know: refused, exit 1 */
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "publish", "--nkey", other_seed, NULL);
    it_argv_connect(&a, &nk);
    it_argv_addl(&a, "--type", "order.paid", "x", NULL);
    int st = it_proc_run(NULL, e->dir, "publish-other-nkey", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    assert_int_equal(st, 1);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(token_auth, it_setup_no_server, it_teardown),
    cmocka_unit_test_setup_teardown(nkey_auth, it_setup_no_server, it_teardown),
    cmocka_unit_test_setup_teardown(user_password_auth, it_setup_no_server, it_teardown),
    cmocka_unit_test_setup_teardown(wrong_password_exits_1, it_setup_no_server, it_teardown),
    cmocka_unit_test_setup_teardown(tls_client_certificates, it_setup_no_server, it_teardown),
};

IB_TEST_MAIN(tests)
