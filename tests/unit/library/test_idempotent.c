/* SPDX-License-Identifier: Apache-2.0 */
/* ib_idempotent_call() as a user of the installed library sees it: only
 * <infinity_bus/idempotency.h>, linked against libinfinity-bus. Built once
 * per kind (IB_LIBRARY_KIND = memory | sqlite, a real file); every outcome
 * is reached, and callers racing the same ids (threads for memory:, forked
 * processes for sqlite:) run each handler exactly once. */
#include <infinity_bus/idempotency.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ib_test.h"

#define CONSUMER "orders"
#define ID_A "7d444840-9dc0-41b5-a00b-0ad8c0e1f8a1"

/* The recorders' clock in these tests, moved by hand. */
static int64_t fake_now = 1700000000000;

static int64_t fake_clock(void)
{
    return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

static bool is_sqlite(void)
{
    const char *kind = getenv("IB_LIBRARY_KIND");
    return kind != NULL && strcmp(kind, "sqlite") == 0;
}

typedef struct fixture {
    char id[IB_EVENT_ID_SIZE]; /* ID_A, normalised */
    char dir[64];
    char uri[128];
    ib_recorder *r;
} fixture;

static ib_recorder *open_uri(const char *uri, bool fake_time)
{
    ib_recorder_options o = {.size = sizeof(o), .now_ms = fake_time ? fake_clock : NULL};
    ib_recorder *r = NULL;
    ib_error err = {0};
    if (ib_recorder_open(&r, uri, &o, &err) != IB_OK)
        fail_msg("open %s: %s", uri, err.msg);
    return r;
}

static void normalise(char out[IB_EVENT_ID_SIZE], const char *id)
{
    ib_error err = {0};
    assert_int_equal(ib_event_id_normalise(out, id, strlen(id), false, &err), IB_OK);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    strcpy(f->dir, "/tmp/ib-library-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    if (is_sqlite())
        snprintf(f->uri, sizeof(f->uri), "sqlite:%s/processed.db", f->dir);
    else
        snprintf(f->uri, sizeof(f->uri), "memory:");
    f->r = open_uri(f->uri, true);
    normalise(f->id, ID_A);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ib_recorder_close(f->r);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

/* A handler that counts its calls and answers what it was told to. */
typedef struct handler {
    int calls;
    ib_status answer;
    const char *message;    /* filled into err when answering non-OK */
    ib_recorder *take_over; /* when set: time passes and "thief" claims the id */
    const char *id;
} handler;

static ib_status handle(void *ctx, ib_error *err)
{
    handler *h = ctx;
    h->calls++;
    if (h->take_over != NULL) {
        __atomic_add_fetch(&fake_now, 60000, __ATOMIC_SEQ_CST);
        ib_claim_state state;
        assert_int_equal(
            ib_recorder_claim(h->take_over, &state, CONSUMER, h->id, "thief", 60000, NULL), IB_OK);
        assert_int_equal(state, IB_CLAIM_ACQUIRED);
    }
    if (h->answer != IB_OK && h->message != NULL)
        snprintf(err->msg, sizeof(err->msg), "%s", h->message);
    return h->answer;
}

static ib_status call(ib_recorder *r, ib_idempotent_result *res, const char *id, handler *h,
                      const ib_idempotent_options *o, ib_error *err)
{
    return ib_idempotent_call(r, res, CONSUMER, id, handle, h, o, err);
}

static void test_handled_then_duplicate(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    handler h = {0};
    ib_idempotent_result res;
    ib_error err = {0};
    assert_int_equal(call(f->r, &res, id, &h, NULL, &err), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_HANDLED);
    assert_true(res.handler_ran);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(h.calls, 1);
    bool done = false;
    assert_int_equal(ib_recorder_is_processed(f->r, &done, CONSUMER, id, NULL), IB_OK);
    assert_true(done);

    assert_int_equal(call(f->r, &res, id, &h, NULL, &err), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_DUPLICATE);
    assert_false(res.handler_ran);
    assert_int_equal(h.calls, 1);

    /* Another consumer has its own marker. */
    assert_int_equal(ib_idempotent_call(f->r, &res, "billing", id, handle, &h, NULL, &err), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_HANDLED);
    assert_int_equal(h.calls, 2);
}

static void test_busy_while_another_holds(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(f->r, &cs, CONSUMER, id, "other", 20000, NULL), IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    __atomic_add_fetch(&fake_now, 5000, __ATOMIC_SEQ_CST);

    handler h = {0};
    ib_idempotent_result res;
    assert_int_equal(call(f->r, &res, id, &h, NULL, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_BUSY);
    assert_int_equal(res.remaining_ms, 15000);
    assert_int_equal(h.calls, 0);

    /* Once the holder's lease ended, the event is ours. */
    __atomic_add_fetch(&fake_now, 15000, __ATOMIC_SEQ_CST);
    assert_int_equal(call(f->r, &res, id, &h, NULL, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_HANDLED);
    assert_int_equal(h.calls, 1);
}

static void test_failure_releases_and_passes_the_error(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    handler h = {.answer = IB_ERR_IO, .message = "payment service: connection refused"};
    ib_idempotent_result res;
    ib_error err = {0};
    assert_int_equal(call(f->r, &res, id, &h, NULL, &err), IB_ERR_IO);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_FAILED);
    assert_true(res.handler_ran);
    assert_int_equal(err.status, IB_ERR_IO);
    assert_string_equal(err.msg, "payment service: connection refused");

    /* Released: another caller (another fresh owner) may try at once, with
     * no time passing. A handler that gives no message gets one. */
    h.message = NULL;
    assert_int_equal(call(f->r, &res, id, &h, NULL, &err), IB_ERR_IO);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_FAILED);
    assert_string_equal(err.msg, "handler failed: i/o error");
    /* memory: forgets the count with the released claim */
    const bool durable = ib_recorder_has_durable_attempts(f->r);
    assert_int_equal(res.attempts, durable ? 2 : 1);
    h.answer = IB_OK;
    assert_int_equal(call(f->r, &res, id, &h, NULL, &err), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_HANDLED);
    assert_int_equal(h.calls, 3);
    assert_int_equal(res.attempts, durable ? 3 : 1);
}

static void test_exhausted_after_max_attempts(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    ib_idempotent_options o = {.size = sizeof(o), .max_attempts = 2};
    handler h = {.answer = IB_ERR_TIMEOUT};
    ib_idempotent_result res;
    if (!ib_recorder_has_durable_attempts(f->r)) {
        /* memory: a failed attempt's release forgets the count; a claim
         * still held (its holder crashed) keeps it */
        ib_claim_state cs;
        assert_int_equal(ib_recorder_claim(f->r, &cs, CONSUMER, id, "crashed", 1000, NULL), IB_OK);
        __atomic_add_fetch(&fake_now, 2000, __ATOMIC_SEQ_CST);
        o.max_attempts = 1;
        assert_int_equal(call(f->r, &res, id, &h, &o, NULL), IB_OK);
        assert_int_equal(res.outcome, IB_IDEMPOTENT_EXHAUSTED);
        assert_int_equal(h.calls, 0);
        return;
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(call(f->r, &res, id, &h, &o, NULL), IB_ERR_TIMEOUT);
        assert_int_equal(res.outcome, IB_IDEMPOTENT_FAILED);
    }
    assert_int_equal(call(f->r, &res, id, &h, &o, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_EXHAUSTED);
    assert_false(res.handler_ran);
    assert_int_equal(h.calls, 2);
    /* Without the limit the event can still be handled. */
    h.answer = IB_OK;
    assert_int_equal(call(f->r, &res, id, &h, NULL, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_HANDLED);
}

static void test_lease_lost_is_not_marked(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    /* The handler outlives its 1 s lease and "thief" claims the id. */
    ib_idempotent_options o = {.size = sizeof(o), .lease_ms = 1000};
    handler h = {.take_over = f->r, .id = id};
    ib_idempotent_result res;
    assert_int_equal(call(f->r, &res, id, &h, &o, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_LEASE_LOST);
    assert_true(res.handler_ran);
    bool done = true;
    assert_int_equal(ib_recorder_is_processed(f->r, &done, CONSUMER, id, NULL), IB_OK);
    assert_false(done);
    /* The thief's run decides: meanwhile others see BUSY. */
    h.take_over = NULL;
    assert_int_equal(call(f->r, &res, id, &h, NULL, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_BUSY);
}

static void test_own_owner_token(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(f->r, &cs, CONSUMER, id, "worker-1", 20000, NULL), IB_OK);
    /* The same owner may take its own claim again (a retry after a crash
     * of the handler's thread, say); another is kept out. */
    ib_idempotent_options o = {.size = sizeof(o), .owner = "worker-1"};
    handler h = {0};
    ib_idempotent_result res;
    assert_int_equal(call(f->r, &res, id, &h, &o, NULL), IB_OK);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_HANDLED);
    assert_int_equal(h.calls, 1);
}

static void test_bad_arguments(void **state)
{
    fixture *f = *state;
    const char *id = f->id;
    handler h = {0};
    ib_idempotent_result res;
    ib_error err = {0};
    assert_int_equal(ib_idempotent_call(f->r, &res, CONSUMER, id, NULL, &h, NULL, &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_ERROR);
    assert_int_equal(ib_idempotent_call(NULL, &res, CONSUMER, id, handle, &h, NULL, &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib_idempotent_call(f->r, NULL, CONSUMER, id, handle, &h, NULL, &err),
                     IB_ERR_INVALID_ARG);
    /* Ids must be normalised, consumers non-empty: the recorder says so. */
    assert_int_equal(call(f->r, &res, ID_A, &h, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_ERROR);
    assert_int_equal(ib_idempotent_call(f->r, &res, "", id, handle, &h, NULL, &err),
                     IB_ERR_INVALID_ARG);
    ib_idempotent_options o = {.size = 1};
    assert_int_equal(call(f->r, &res, id, &h, &o, &err), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "options size"));
    o = (ib_idempotent_options){.size = sizeof(o), .lease_ms = -5};
    assert_int_equal(call(f->r, &res, id, &h, &o, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(res.outcome, IB_IDEMPOTENT_ERROR);
    assert_false(res.handler_ran);
    assert_int_equal(h.calls, 0);
}

static void test_event_id_forms(void **state)
{
    (void)state;
    char out[IB_EVENT_ID_SIZE];
    ib_error err = {0};
    assert_int_equal(ib_event_id_normalise(out, ID_A, strlen(ID_A), false, &err), IB_OK);
    assert_string_equal(out, "7d4448409dc041b5a00b0ad8c0e1f8a1");
    const char *upper = "7D4448409DC041B5A00B0AD8C0E1F8A1";
    assert_int_equal(ib_event_id_normalise(out, upper, strlen(upper), false, &err), IB_OK);
    assert_string_equal(out, "7d4448409dc041b5a00b0ad8c0e1f8a1");
    /* A uuid7 needs any_version. */
    const char *v7 = "018f3b5e-8c2a-7d4e-9b1a-3c5d7e9f1a2b";
    assert_int_equal(ib_event_id_normalise(out, v7, strlen(v7), false, &err), IB_ERR_INVALID_ID);
    assert_string_equal(out, "");
    assert_non_null(strstr(err.msg, "version"));
    assert_int_equal(ib_event_id_normalise(out, v7, strlen(v7), true, &err), IB_OK);
    /* Raw bytes: an embedded NUL is refused, not cut off. */
    char raw[40];
    memcpy(raw, "7d4448409dc041b5a00b0ad8c0e1f8a1", 32);
    raw[31] = '\0';
    assert_int_equal(ib_event_id_normalise(out, raw, 32, false, &err), IB_ERR_INVALID_ID);
    assert_int_equal(ib_event_id_normalise(out, "", 0, false, &err), IB_ERR_INVALID_ID);
    assert_int_equal(ib_event_id_normalise(NULL, ID_A, 36, false, &err), IB_ERR_INVALID_ARG);
}

/* The race: RACERS callers each go through the same RACE_IDS ids, retrying
 * BUSY and FAILED until each id is HANDLED or DUPLICATE. The handler
 * appends the id to a log (O_APPEND, one write) and fails now and then; in
 * the end every id is in the log exactly once. */
#define RACERS 4
#define RACE_IDS 24

typedef struct racer {
    const char *uri;     /* sqlite: each process opens its own */
    ib_recorder *shared; /* memory: the threads share one */
    int log_fd;
    unsigned seed;
    int failures;
} racer;

typedef struct race_call {
    racer *who;
    const char *id;
} race_call;

static ib_status race_handle(void *ctx, ib_error *err)
{
    race_call *c = ctx;
    (void)err;
    if (rand_r(&c->who->seed) % 5 == 0) {
        c->who->failures++;
        return IB_ERR_IO;
    }
    char line[IB_EVENT_ID_SIZE + 1];
    snprintf(line, sizeof(line), "%s\n", c->id);
    if (write(c->who->log_fd, line, IB_EVENT_ID_SIZE) != IB_EVENT_ID_SIZE)
        return IB_ERR_IO;
    usleep(200);
    return IB_OK;
}

static void race_id(char out[IB_EVENT_ID_SIZE], int n)
{
    char raw[64];
    snprintf(raw, sizeof(raw), "00000000-0000-4000-8000-%012d", n);
    ib_event_id_normalise(out, raw, strlen(raw), false, NULL);
}

/* Returns 0 when every id reached a verdict. */
static int race(racer *w)
{
    ib_recorder *r = w->shared != NULL ? w->shared : open_uri(w->uri, false);
    int bad = 0;
    for (int n = 0; n < RACE_IDS; n++) {
        char id[IB_EVENT_ID_SIZE];
        race_id(id, n);
        race_call c = {.who = w, .id = id};
        ib_idempotent_result res;
        ib_error err = {0};
        for (;;) {
            ib_status st = ib_idempotent_call(r, &res, CONSUMER, id, race_handle, &c, NULL, &err);
            if (res.outcome == IB_IDEMPOTENT_HANDLED || res.outcome == IB_IDEMPOTENT_DUPLICATE)
                break;
            if (res.outcome == IB_IDEMPOTENT_BUSY || res.outcome == IB_IDEMPOTENT_FAILED) {
                usleep(100);
                continue;
            }
            fprintf(stderr, "racer: outcome %d: %s: %s\n", (int)res.outcome, ib_status_str(st),
                    err.msg);
            bad++;
            break;
        }
    }
    if (w->shared == NULL)
        ib_recorder_close(r);
    return bad;
}

static void *race_thread(void *arg)
{
    racer *w = arg;
    return race(w) == 0 ? NULL : arg;
}

static void check_log(const char *path)
{
    FILE *log = fopen(path, "r");
    assert_non_null(log);
    int seen[RACE_IDS] = {0};
    char line[64];
    while (fgets(line, sizeof(line), log) != NULL) {
        int n = -1;
        for (int i = 0; i < RACE_IDS; i++) {
            char id[IB_EVENT_ID_SIZE];
            race_id(id, i);
            if (strncmp(line, id, IB_EVENT_ID_SIZE - 1) == 0)
                n = i;
        }
        assert_true(n >= 0);
        seen[n]++;
    }
    fclose(log);
    for (int i = 0; i < RACE_IDS; i++)
        assert_int_equal(seen[i], 1);
}

static void test_racers_run_each_handler_once(void **state)
{
    fixture *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/handled.log", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    assert_true(fd >= 0);
    racer w[RACERS];
    for (int k = 0; k < RACERS; k++)
        w[k] = (racer){.uri = f->uri, .log_fd = fd, .seed = 17u + (unsigned)k};
    if (is_sqlite()) {
        pid_t pids[RACERS];
        for (int k = 0; k < RACERS; k++) {
            pids[k] = fork();
            assert_true(pids[k] >= 0);
            if (pids[k] == 0)
                _exit(race(&w[k]) == 0 ? 0 : 1);
        }
        for (int k = 0; k < RACERS; k++) {
            int status = 0;
            while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR) {
            }
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
        }
    } else {
        /* memory: lives in one process: threads, each call its own owner */
        ib_recorder *r = open_uri(f->uri, false);
        pthread_t t[RACERS];
        for (int k = 0; k < RACERS; k++) {
            w[k].shared = r;
            assert_int_equal(pthread_create(&t[k], NULL, race_thread, &w[k]), 0);
        }
        for (int k = 0; k < RACERS; k++) {
            void *failed = NULL;
            assert_int_equal(pthread_join(t[k], &failed), 0);
            assert_null(failed);
        }
        ib_recorder_close(r);
    }
    close(fd);
    check_log(path);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_handled_then_duplicate, setup, teardown),
    cmocka_unit_test_setup_teardown(test_busy_while_another_holds, setup, teardown),
    cmocka_unit_test_setup_teardown(test_failure_releases_and_passes_the_error, setup, teardown),
    cmocka_unit_test_setup_teardown(test_exhausted_after_max_attempts, setup, teardown),
    cmocka_unit_test_setup_teardown(test_lease_lost_is_not_marked, setup, teardown),
    cmocka_unit_test_setup_teardown(test_own_owner_token, setup, teardown),
    cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
    cmocka_unit_test(test_event_id_forms),
    cmocka_unit_test_setup_teardown(test_racers_run_each_handler_once, setup, teardown),
};

IB_TEST_MAIN(tests)
