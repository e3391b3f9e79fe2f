/* SPDX-License-Identifier: Apache-2.0 */
/* Where a plugin's configuration comes from: --plugin-config NAME=STRING
 * (last one wins) beats IB_PLUGIN_CONFIG_<NAME>. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"

#include "loader.h"

static void lookup(char **out, const char *const *flags, const char *name)
{
    ib_error err;
    ib_error_clear(&err);
    assert_int_equal(ib_plugin_config_lookup(out, flags, name, &err), IB_OK);
    assert_int_equal(err.status, IB_OK);
}

static void flag_beats_environment(void **state)
{
    const char *flags[] = {"audit=file=flag.log", NULL};
    char *got = NULL;
    (void)state;

    setenv("IB_PLUGIN_CONFIG_AUDIT", "file=env.log", 1);
    lookup(&got, flags, "audit");
    assert_string_equal(got, "file=flag.log");
    free(got);
    lookup(&got, NULL, "audit");
    assert_string_equal(got, "file=env.log");
    free(got);
    unsetenv("IB_PLUGIN_CONFIG_AUDIT");
}

static void last_flag_wins(void **state)
{
    const char *flags[] = {"relay=to=a", "audit=file=x", "relay=to=b,x=y", NULL};
    char *got = NULL;
    (void)state;

    lookup(&got, flags, "relay");
    assert_string_equal(got, "to=b,x=y");
    free(got);
}

static void names_match_exactly(void **state)
{
    const char *flags[] = {"aud=short", "audit2=longer", "Audit=case", NULL};
    char *got = (char *)&got;
    (void)state;

    unsetenv("IB_PLUGIN_CONFIG_AUDIT");
    lookup(&got, flags, "audit");
    assert_null(got);
}

static void empty_values_are_values(void **state)
{
    const char *flags[] = {"audit=", NULL};
    char *got = NULL;
    (void)state;

    setenv("IB_PLUGIN_CONFIG_AUDIT", "file=env.log", 1);
    lookup(&got, flags, "audit");
    assert_string_equal(got, "");
    free(got);
    unsetenv("IB_PLUGIN_CONFIG_AUDIT");
}

static void not_found_is_an_answer(void **state)
{
    char *got = (char *)&got;
    (void)state;

    unsetenv("IB_PLUGIN_CONFIG_NOBODY");
    lookup(&got, NULL, "nobody");
    assert_null(got);
}

static void environment_name_folds_the_plugin_name(void **state)
{
    char *got = NULL;
    (void)state;

    setenv("IB_PLUGIN_CONFIG_MY_AUDIT_V2", "k=v", 1);
    lookup(&got, NULL, "my-audit.v2");
    assert_string_equal(got, "k=v");
    free(got);
    unsetenv("IB_PLUGIN_CONFIG_MY_AUDIT_V2");
}

static void environment_names(void **state)
{
    static const struct {
        const char *plugin, *env;
    } table[] = {
        {"audit", "IB_PLUGIN_CONFIG_AUDIT"},
        {"my-audit", "IB_PLUGIN_CONFIG_MY_AUDIT"},
        {"Mixed.Case_9", "IB_PLUGIN_CONFIG_MIXED_CASE_9"},
        {"a.b-c_d", "IB_PLUGIN_CONFIG_A_B_C_D"},
    };
    char buf[64];
    (void)state;

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        assert_true(ib_plugin_config_env_name(buf, sizeof(buf), table[i].plugin));
        assert_string_equal(buf, table[i].env);
    }
    /* "IB_PLUGIN_CONFIG_" is 17 bytes: 17 + 5 + NUL needs 23. */
    assert_false(ib_plugin_config_env_name(buf, 22, "audit"));
    assert_true(ib_plugin_config_env_name(buf, 23, "audit"));
    assert_string_equal(buf, "IB_PLUGIN_CONFIG_AUDIT");
}

static void malformed_flags_are_refused(void **state)
{
    static const struct {
        const char *flag, *msg;
    } table[] = {
        {"audit", "plugin configuration \"audit\": expected NAME=STRING"},
        {"=file=x", "plugin configuration \"=file=x\": expected NAME=STRING"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const char *flags[] = {"relay=to=x", table[i].flag, NULL};
        char *got = (char *)&got;
        ib_error err;
        assert_int_equal(ib_plugin_config_lookup(&got, flags, "relay", &err), IB_ERR_CONFIG);
        assert_null(got);
        assert_string_equal(err.msg, table[i].msg);
    }
}

static void missing_name_is_misuse(void **state)
{
    char *got = (char *)&got;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_config_lookup(&got, NULL, "", &err), IB_ERR_INVALID_ARG);
    assert_null(got);
}

/* A configuration by name for no loaded plugin (issue 45, item 5): which
 * entry is stray and which loaded plugin it likely meant. */
static void stray_configurations(void **state)
{
    static const char *const loaded[] = {"audit", "my-relay"};
    static const struct {
        const char *pair;  /* one --plugin-config entry, or NULL */
        const char *env;   /* one environment entry, or NULL */
        const char *stray; /* the entry found, or NULL for none */
        const char *meant; /* its nearest loaded name, or NULL */
    } table[] = {
        {"audit=file=x", "IB_PLUGIN_CONFIG_MY_RELAY=a", NULL, NULL},
        {"adit=file=x", NULL, "adit=file=x", "audit"},
        {"audti=x", NULL, "audti=x", "audit"},
        {"zzzzzzz=x", NULL, "zzzzzzz=x", NULL},
        {"Audit=x", NULL, "Audit=x", "audit"}, /* names match exactly */
        {"=x", NULL, NULL, NULL},              /* the lookup refuses it */
        {NULL, "IB_PLUGIN_CONFIG_ADIT=x", "IB_PLUGIN_CONFIG_ADIT=x", "audit"},
        {NULL, "IB_PLUGIN_CONFIG_MY_RELAI=x", "IB_PLUGIN_CONFIG_MY_RELAI=x", "my-relay"},
        {NULL, "IB_PLUGIN_CONFIG_ZZZZZZZ=x", "IB_PLUGIN_CONFIG_ZZZZZZZ=x", NULL},
        {NULL, "IB_PLUGIN_CONFIG=x", NULL, NULL}, /* not a plugin's variable */
        {NULL, "IB_NATS_URL=x", NULL, NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const char *pairs[] = {table[i].pair, NULL};
        char env_entry[64];
        char *env[] = {env_entry, NULL};
        snprintf(env_entry, sizeof(env_entry), "%s", table[i].env != NULL ? table[i].env : "");
        ib_plugin_config_stray st;
        bool found =
            ib_plugin_config_find_stray(&st, pairs, table[i].env != NULL ? env : NULL, loaded, 2);
        assert_int_equal(found, table[i].stray != NULL);
        if (!found)
            continue;
        assert_string_equal(st.entry, table[i].stray);
        assert_int_equal(st.name_len, (size_t)(strchr(table[i].stray, '=') - table[i].stray));
        assert_int_equal(st.from_env, table[i].env != NULL);
        if (table[i].meant == NULL)
            assert_null(st.nearest);
        else
            assert_string_equal(st.nearest, table[i].meant);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(stray_configurations),
    cmocka_unit_test(flag_beats_environment),
    cmocka_unit_test(last_flag_wins),
    cmocka_unit_test(names_match_exactly),
    cmocka_unit_test(empty_values_are_values),
    cmocka_unit_test(not_found_is_an_answer),
    cmocka_unit_test(environment_name_folds_the_plugin_name),
    cmocka_unit_test(environment_names),
    cmocka_unit_test(malformed_flags_are_refused),
    cmocka_unit_test(missing_name_is_misuse),
};

IB_TEST_MAIN(tests)
