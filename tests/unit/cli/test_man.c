/* SPDX-License-Identifier: Apache-2.0 */
/* The manual page writer and the help printed from the same description
 * data: roff escaping, and a page made from two made-up commands. The page
 * of the real commands is checked with groff and against every --help by
 * test_man_page.sh. */
#include "ib_test.h"

#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "man.h"

/* Captures what `call` writes to `out`; the caller frees `text`. The
 * length lives as long as the test (an open_memstream target must outlive
 * the stream, and GCC checks that). */
static size_t captured_len;
#define CAPTURE(text, call)                                                                        \
    do {                                                                                           \
        FILE *out = open_memstream(&(text), &captured_len);                                        \
        assert_non_null(out);                                                                      \
        call;                                                                                      \
        assert_int_equal(fclose(out), 0);                                                          \
    } while (0)

static void escaping(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } c[] = {
        {"", ""},
        {"plain text", "plain text"},
        {"--nats-url", "\\-\\-nats\\-url"},
        {"dead-letter", "dead\\-letter"},
        {"a\\b", "a\\eb"},
        {"\\fB", "\\efB"},
        {".TH fake", "\\&.TH fake"},
        {"'br", "\\&'br"},
        {"one\n.two\n'three\nfour.", "one\n\\&.two\n\\&'three\nfour."},
        {"it's 1.5", "it's 1.5"},
        {"\\-", "\\e\\-"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char *text = NULL;
        CAPTURE(text, ib_roff_escape(out, c[i].in));
        assert_string_equal(text, c[i].want);
        free(text);
    }
}

typedef struct demo_args {
    const char *url;
    int64_t level, wait_ms;
    bool force;
    ib_strlist tags;
} demo_args;

static size_t demo_options(ib_opt *opts, void *targets)
{
    demo_args *a = targets;
    const ib_opt table[] = {
        {"url", IB_OPT_STRING, &a->url, "URL", "nats://127.0.0.1:4222", "server URL", 0, 0},
        {"level", IB_OPT_INT, &a->level, "N", "3", "how loud", 1, 9},
        {"wait", IB_OPT_DURATION, &a->wait_ms, "DURATION", "30s", "how long", 100, 86400000},
        {"force", IB_OPT_FLAG, &a->force, NULL, NULL, "skip the check", 0, 0},
        {"tag", IB_OPT_LIST, &a->tags, NULL, NULL, "a tag", 0, 0},
    };
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* A second command sharing --url, so IB_URL names both. */
static size_t other_options(ib_opt *opts, void *targets)
{
    demo_args *a = targets;
    const ib_opt table[] = {
        {"url", IB_OPT_STRING, &a->url, "URL", NULL, "where to go", 0, 0},
    };
    memcpy(opts, table, sizeof(table));
    return 1;
}

static int never_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fail();
    return 1;
}

static const ib_cmd_action demo_actions[] = {
    {"go", "ID", "go to ID"},
    {"stop", NULL, "stop"},
};

static const ib_cmd_desc demo = {
    .name = "demo",
    .synopsis = "[options] ACTION",
    .summary = "a demo",
    .description = ".starts with a dot - and a dash",
    .actions = demo_actions,
    .nactions = 2,
    .options = demo_options,
    .targets_size = sizeof(demo_args),
    .main = never_run,
};
static const ib_cmd_desc other = {
    .name = "other",
    .synopsis = "[options]",
    .summary = "another",
    .description = "Another.",
    .options = other_options,
    .targets_size = sizeof(demo_args),
    .main = never_run,
};
static const ib_cmd_desc bare = {.name = "bare",
                                 .synopsis = "",
                                 .summary = "no options",
                                 .description = "Bare.",
                                 .main = never_run};

/* The page of `cmds` into *text, which the caller frees. */
static void page_of(char **text, const ib_cmd_desc *const *cmds, size_t n)
{
    const ib_man_page page = {.version = "9.8.7",
                              .date = "2026-01-02",
                              .plugin_dir = "/opt/ib/plugins",
                              .cmds = cmds,
                              .ncmds = n};
    int rc = -1;
    CAPTURE(*text, rc = ib_man_write(out, &page));
    assert_int_equal(rc, 0);
}

static size_t count(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

static void page_from_tables(void **state)
{
    (void)state;
    const ib_cmd_desc *const cmds[] = {&demo, &other, &bare};
    char *text = NULL;
    page_of(&text, cmds, 3);
    static const char *const want[] = {
        ".TH IBUS 1 \"2026-01-02\" \"infinity-bus 9.8.7\" \"User Commands\"\n",
        "\n.SH NAME\nibus \\- ",
        "\n.B ibus demo\n[options] ACTION\n.br\n.B ibus other\n",
        "\n.B ibus bare\n.SH DESCRIPTION\n",
        "\n.SS ibus demo\n\\&.starts with a dot \\- and a dash\n.PP\nActions:\n"
        ".TP\n\\fBgo\\fR \\fIID\\fR\ngo to ID.\n",
        "\n.TP\n\\fB\\-\\-url\\fR \\fIURL\\fR\nserver URL.\nEnvironment: \\fBIB_URL\\fR; "
        "default: \\fBnats://127.0.0.1:4222\\fR.\n",
        "\n.TP\n\\fB\\-\\-level\\fR \\fIN\\fR\nhow loud.\nEnvironment: \\fBIB_LEVEL\\fR; "
        "default: \\fB3\\fR; range: 1..9.\n",
        "; default: \\fB30s\\fR; range: 100ms..1d.\n",
        "\n.TP\n\\fB\\-\\-force\\fR\nskip the check.\nEnvironment: \\fBIB_FORCE\\fR.\n",
        "\n.TP\n\\fB\\-\\-tag\\fR \\fIVALUE\\fR\na tag; repeatable.\n",
        "\n.SS ibus bare\nBare.\n.SH ENVIRONMENT\n",
        "\n.TP\n\\fBIB_URL\\fR\n\\fB\\-\\-url\\fR of ibus demo, ibus other.\n",
        "\n.TP\n\\fBIB_PLUGIN_CONFIG_<NAME>\\fR\n",
        "\n.SH EXIT STATUS\n",
        "\n.SH SIGNALS\n",
        "\n.SH FILES\n",
        "\n.TP\n\\fB/opt/ib/plugins/*.so\\fR\n",
        "\n.SH EXAMPLES\n",
        "\n.SH SEE ALSO\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (strstr(text, want[i]) == NULL)
            fail_msg("the page lacks:\n%s\n--- page:\n%s", want[i], text);
    }
    assert_int_equal(count(text, "\\fBIB_URL\\fR\n"), 1); /* one entry for both commands */
    assert_int_equal(count(text, "\n.SS "), 3);
    assert_int_equal(count(text, "\n.TH "), 1);
    free(text);
}

/* Without a date the page still has the .TH fields in place; a version's
 * '-' stays a hyphen, and a quote or a backslash cannot end the field. */
static void page_without_date(void **state)
{
    (void)state;
    const ib_cmd_desc *const cmds[] = {&bare};
    const ib_man_page page = {
        .version = "1.0-rc\"\\", .date = "", .plugin_dir = "/p", .cmds = cmds, .ncmds = 1};
    char *text = NULL;
    CAPTURE(text, assert_int_equal(ib_man_write(out, &page), 0));
    assert_non_null(
        strstr(text, "\n.TH IBUS 1 \"\" \"infinity-bus 1.0-rc\\(dq\\e\" \"User Commands\"\n"));
    free(text);
}

static void usage_from_tables(void **state)
{
    (void)state;
    demo_args a;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    memset(&a, 0, sizeof(a));
    size_t n = demo.options(opts, &a);
    char *text = NULL;
    CAPTURE(text, ib_cmd_usage(out, &demo, opts, n));
    assert_non_null(strstr(text, "usage: ibus demo [options] ACTION\n\n.starts with a dot"));
    assert_non_null(strstr(text, "\nactions:\n  go ID "));
    assert_non_null(strstr(text, "\n  stop "));
    assert_non_null(strstr(text, "\n  --level N "));
    assert_non_null(strstr(text, "[IB_LEVEL; default 3]\n"));
    assert_non_null(strstr(text, "\n  --force "));
    assert_non_null(strstr(text, "a tag (repeatable)\n"));
    free(text);

    CAPTURE(text, ib_cmd_usage(out, &bare, NULL, 0));
    assert_string_equal(text, "usage: ibus bare\n\nBare.\n");
    free(text);

    /* --help wraps the description at 78 columns */
    ib_cmd_desc wordy = bare;
    wordy.description = "Eighty columns are a terminal's width, and a description longer than "
                        "that wraps between words, never inside one: supercalifragilistic.";
    CAPTURE(text, ib_cmd_usage(out, &wordy, NULL, 0));
    assert_string_equal(text, "usage: ibus bare\n\nEighty columns are a terminal's width, and a "
                              "description longer than that\nwraps between words, never inside "
                              "one: supercalifragilistic.\n");
    free(text);

    const ib_cmd_desc *const cmds[] = {&demo, &bare};
    CAPTURE(text, ib_cmds_usage(out, cmds, 2));
    assert_non_null(strstr(text, "\n  demo      a demo\n  bare      no options\n"));
    free(text);
}

static void actions(void **state)
{
    (void)state;
    char buf[64];
    assert_ptr_equal(ib_cmd_action_find(&demo, "stop"), &demo_actions[1]);
    assert_null(ib_cmd_action_find(&demo, "sto"));
    assert_null(ib_cmd_action_find(&bare, "go"));
    assert_string_equal(ib_cmd_actions_list(buf, sizeof(buf), &demo), "go, stop");
    assert_string_equal(ib_cmd_actions_list(buf, 5, &demo), "go, "); /* cut, terminated */
    assert_string_equal(ib_cmd_actions_list(buf, sizeof(buf), &bare), "");
}

/* One test per line: CMake registers them by reading these lines. */
// clang-format off
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(escaping),
    cmocka_unit_test(page_from_tables),
    cmocka_unit_test(page_without_date),
    cmocka_unit_test(usage_from_tables),
    cmocka_unit_test(actions),
};
// clang-format on

IB_TEST_MAIN(tests)
