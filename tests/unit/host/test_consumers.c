/* SPDX-License-Identifier: Apache-2.0 */
/* Consumer identities (host_consumers.c): handlers of loaded plugins join
 * the idempotent core's dispatch under "<durable>/<plugin>/<handler>" or
 * an override, and a mistyped override is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib_test.h"

#include "dispatch.h"
#include "event.h"
#include "fixture.h"
#include "host.h"
#include "loader.h"
#include "recorder.h"
#include "uuid.h"

#define PLUGINS IB_TEST_PLUGINS_DIR

typedef struct world {
    ib_recorder *rec;
    ib_dispatch *d;
    ib_plugin *scripted, *probe;
    char *scripted_log, *probe_log;
} world;

static int teardown(void **state)
{
    world *w = *state;
    if (w != NULL) {
        /* Dispatch borrows the plugins' handlers: it goes first. */
        ib_dispatch_free(w->d);
        ib_plugin_close(w->scripted);
        ib_plugin_close(w->probe);
        ib_recorder_close(w->rec);
        free(w->scripted_log);
        free(w->probe_log);
        free(w);
    }
    fx_cleanup();
    return 0;
}

static ib_plugin *load(const char *file, const char *config)
{
    char *path = fx_stage(PLUGINS, file, NULL, 0755);
    ib_plugin *p = NULL;
    ib_error err;

    ib_error_clear(&err);
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, config, &err), IB_OK);
    free(path);
    return p;
}

/* A world with the scripted and probe plugins loaded and initialised,
 * writing their lines to files, and an empty dispatch table. */
static world *make_world(void **state)
{
    world *w = calloc(1, sizeof(*w));
    char *config;
    ib_error err;

    assert_non_null(w);
    *state = w;
    w->scripted_log = fx_fmt("%s/scripted.log", fx_dir());
    w->probe_log = fx_fmt("%s/probe.log", fx_dir());
    config = fx_fmt("file=%s", w->scripted_log);
    w->scripted = load("scripted.so", config);
    free(config);
    config = fx_fmt("file=%s", w->probe_log);
    w->probe = load("probe.so", config);
    free(config);
    assert_int_equal(ib_recorder_open(&w->rec, "memory:", NULL, &err), IB_OK);
    assert_int_equal(ib_dispatch_create(&w->d, w->rec, NULL, &err), IB_OK);
    return w;
}

static void run_event(world *w, ib_delivery *dl, ib_event **ev, const char *type,
                      const char *payload)
{
    fx_run_event(w->d, dl, ev, type, payload, 1);
}

static bool marked(world *w, const char *consumer, const char *id)
{
    bool done = false;
    ib_error err;
    assert_int_equal(ib_recorder_is_processed(w->rec, &done, consumer, id, &err), IB_OK);
    return done;
}

static void handlers_of_two_plugins_on_one_type_both_run(void **state)
{
    world *w = make_world(state);
    ib_delivery dl;
    ib_event *ev = NULL;
    ib_error err;
    char *got, *expected;

    assert_int_equal(ib_host_plugin_register(w->scripted, w->d, "orders", NULL, &err), IB_OK);
    assert_int_equal(ib_host_plugin_register(w->probe, w->d, "orders", NULL, &err), IB_OK);
    /* scripted/scripted, scripted/second and probe/probe. */
    assert_int_equal(ib_dispatch_count_for(w->d, "test.scripted"), 3);
    assert_int_equal(ib_dispatch_count_for(w->d, "test.other"), 1);
    assert_int_equal(ib_dispatch_count_for(w->d, "test.probe"), 1);

    run_event(w, &dl, &ev, "test.scripted", "ok");
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.handled, 3);

    got = fx_read(w->scripted_log);
    /* the plugin runs in this process: its lines name this pid */
    expected = fx_fmt("orders/scripted/scripted %s test.scripted 1 ok %ld\n"
                      "orders/scripted/second %s test.scripted 1 ok %ld\n",
                      ev->id, (long)getpid(), ev->id, (long)getpid());
    assert_string_equal(got, expected);
    free(got);
    free(expected);
    got = fx_read(w->probe_log);
    expected = fx_fmt("init abi=%d.%d config=file=%s\norders/probe/probe %s test.scripted\n",
                      IB_ABI_MAJOR, IB_ABI_MINOR, w->probe_log, ev->id);
    assert_string_equal(got, expected);
    free(got);
    free(expected);
    ib_event_free(ev);
}

static void default_identity_is_durable_plugin_handler(void **state)
{
    world *w = make_world(state);
    ib_delivery dl;
    ib_event *ev = NULL;
    ib_error err;

    assert_int_equal(ib_host_plugin_register(w->scripted, w->d, "billing", NULL, &err), IB_OK);
    run_event(w, &dl, &ev, "test.other", "ok");
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_true(marked(w, "billing/scripted/other", ev->id));
    assert_false(marked(w, "billing/scripted/scripted", ev->id));
    ib_event_free(ev);
}

static void an_override_names_the_identity(void **state)
{
    world *w = make_world(state);
    const char *overrides[] = {"scripted/other=legacy-other", "probe/probe=legacy-probe",
                               "ghost/handler=ignored-here", NULL};
    ib_plugin *both[2];
    ib_delivery dl;
    ib_event *ev = NULL;
    ib_error err;
    char *got, *expected;

    both[0] = w->scripted;
    both[1] = w->probe;
    /* Registration ignores overrides of other plugins; the check does not. */
    assert_int_equal(ib_host_overrides_check(overrides, both, 2, &err), IB_ERR_CONFIG);
    assert_string_equal(err.msg, "consumer override \"ghost/handler=ignored-here\": no loaded "
                                 "plugin is named \"ghost\"");
    assert_int_equal(ib_host_plugin_register(w->scripted, w->d, "orders", overrides, &err), IB_OK);
    assert_int_equal(ib_host_plugin_register(w->probe, w->d, "orders", overrides, &err), IB_OK);

    run_event(w, &dl, &ev, "test.other", "ok");
    assert_true(marked(w, "legacy-other", ev->id));
    assert_false(marked(w, "orders/scripted/other", ev->id));
    ib_event_free(ev);

    run_event(w, &dl, &ev, "test.probe", "ok");
    assert_true(marked(w, "legacy-probe", ev->id));
    assert_false(marked(w, "orders/probe/probe", ev->id));
    got = fx_read(w->probe_log);
    expected = fx_fmt("legacy-probe %s test.probe\n", ev->id);
    assert_non_null(strstr(got, expected));
    free(got);
    free(expected);
    ib_event_free(ev);
}

static void registering_before_init_is_refused(void **state)
{
    world *w = make_world(state);
    char *path = fx_stage(PLUGINS, "good.so", NULL, 0755);
    char *expected = fx_fmt("plugin %s: registered before init", path);
    ib_plugin *p = NULL;
    ib_error err;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_host_plugin_register(p, w->d, "orders", NULL, &err), IB_ERR_INVALID_ARG);
    assert_string_equal(err.msg, expected);
    assert_int_equal(ib_dispatch_count_for(w->d, "test.good"), 0);
    ib_plugin_close(p);
    free(expected);
    free(path);
}

static void an_overlong_identity_is_refused(void **state)
{
    world *w = make_world(state);
    char durable[IB_CONSUMER_MAX];
    char *path = fx_fmt("%s/scripted.so", fx_dir());
    char *expected;
    ib_error err;

    memset(durable, 'd', sizeof(durable) - 1);
    durable[sizeof(durable) - 1] = '\0';
    /* 254 + "/scripted/scripted" (18) = 272 bytes. */
    expected = fx_fmt("plugin %s: consumer identity of handler scripted/scripted must be 1-%d "
                      "bytes, got %d",
                      path, IB_CONSUMER_MAX, (int)sizeof(durable) - 1 + 18);
    assert_int_equal(ib_host_plugin_register(w->scripted, w->d, durable, NULL, &err),
                     IB_ERR_CONFIG);
    assert_string_equal(err.msg, expected);
    free(expected);
    free(path);
}

static void clashing_identities_are_refused(void **state)
{
    world *w = make_world(state);
    const char *overrides[] = {"probe/probe=orders/scripted/other", NULL};
    char *prefix = fx_fmt("plugin %s/probe.so: ", fx_dir());
    ib_error err;

    assert_int_equal(ib_host_plugin_register(w->scripted, w->d, "orders", overrides, &err), IB_OK);
    assert_int_equal(ib_host_plugin_register(w->probe, w->d, "orders", overrides, &err),
                     IB_ERR_CONFIG);
    /* The rest of the message is dispatch's; it names the identity. */
    assert_memory_equal(err.msg, prefix, strlen(prefix));
    assert_non_null(strstr(err.msg, "\"orders/scripted/other\""));
    free(prefix);
}

static void override_checks(void **state)
{
    static const struct {
        const char *entry, *msg;
    } table[] = {
        {"scripted/other",
         "consumer override \"scripted/other\": expected PLUGIN/HANDLER=IDENTITY"},
        {"scripted=x", "consumer override \"scripted=x\": expected PLUGIN/HANDLER=IDENTITY"},
        {"/other=x", "consumer override \"/other=x\": expected PLUGIN/HANDLER=IDENTITY"},
        {"scripted/=x", "consumer override \"scripted/=x\": expected PLUGIN/HANDLER=IDENTITY"},
        {"scripted/other=", "consumer override \"scripted/other=\": empty identity"},
        {"scripted/nope=x", "consumer override \"scripted/nope=x\": plugin scripted has no "
                            "handler \"nope\""},
        {"scripte/other=x", "consumer override \"scripte/other=x\": no loaded plugin is named "
                            "\"scripte\""},
    };
    world *w = make_world(state);
    ib_plugin *both[2];
    const char *twice[] = {"scripted/other=a", "probe/probe=b", "scripted/other=c", NULL};
    const char *fine[] = {"scripted/other=a", "scripted/second=b/c=d", "probe/probe=x", NULL};
    char long_entry[300];
    const char *too_long[] = {long_entry, NULL};
    ib_error err;

    both[0] = w->scripted;
    both[1] = w->probe;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const char *list[] = {"probe/probe=ok", table[i].entry, NULL};
        assert_int_equal(ib_host_overrides_check(list, both, 2, &err), IB_ERR_CONFIG);
        assert_string_equal(err.msg, table[i].msg);
    }
    assert_int_equal(ib_host_overrides_check(twice, both, 2, &err), IB_ERR_CONFIG);
    assert_string_equal(err.msg, "consumer override \"scripted/other=c\": handler scripted/other "
                                 "is overridden twice");
    snprintf(long_entry, sizeof(long_entry), "probe/probe=%0*d", IB_CONSUMER_MAX + 1, 0);
    assert_int_equal(ib_host_overrides_check(too_long, both, 2, &err), IB_ERR_CONFIG);
    assert_string_equal(err.msg, "consumer override \"probe/probe=0000000000000000000000000000..."
                                 "\": identity longer than 255 bytes");
    assert_int_equal(ib_host_overrides_check(fine, both, 2, &err), IB_OK);
    assert_int_equal(ib_host_overrides_check(NULL, both, 2, &err), IB_OK);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(handlers_of_two_plugins_on_one_type_both_run, teardown),
    cmocka_unit_test_teardown(default_identity_is_durable_plugin_handler, teardown),
    cmocka_unit_test_teardown(an_override_names_the_identity, teardown),
    cmocka_unit_test_teardown(registering_before_init_is_refused, teardown),
    cmocka_unit_test_teardown(an_overlong_identity_is_refused, teardown),
    cmocka_unit_test_teardown(clashing_identities_are_refused, teardown),
    cmocka_unit_test_teardown(override_checks, teardown),
};

IB_TEST_MAIN(tests)
