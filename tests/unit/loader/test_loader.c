/* SPDX-License-Identifier: Apache-2.0 */
/* The loader: its error table (each refusal with its exact message), file
 * trust, descriptor versions, and the init/fini lifecycle. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ib_test.h"

#include "fixture.h"
#include "loader.h"
#include "loader_internal.h"
#include "trust.h"

#define PLUGINS IB_TEST_PLUGINS_DIR
#define OPT_OUT "allow insecure plugin files (development only)"
#define NAME_RULE "use 1-64 characters of A-Z a-z 0-9 . _ -"

static int teardown(void **state)
{
    (void)state;
    fx_cleanup();
    return 0;
}

/* True if the file at `path` is mapped in this process. */
static bool is_loaded(const char *path)
{
    struct stat st;
    char *real;
    void *h;

    /* dlopen opens the file even with RTLD_NOLOAD: a FIFO would block. */
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    real = realpath(path, NULL);
    h = real != NULL ? dlopen(real, RTLD_NOW | RTLD_NOLOAD) : NULL;
    free(real);
    if (h == NULL)
        return false;
    dlclose(h);
    return true;
}

/* Opens `path`, expects refusal `status` with exactly `expected`, and checks
 * that nothing stays loaded. Frees both strings. */
static void expect_refusal_opts(char *path, char *expected, ib_status status,
                                const ib_plugin_open_options *opts)
{
    ib_plugin *p = (ib_plugin *)&p;
    ib_error err;

    ib_error_clear(&err);
    assert_int_equal(ib_plugin_open(&p, path, opts, &err), status);
    assert_null(p);
    assert_int_equal(err.status, status);
    assert_string_equal(err.msg, expected);
    assert_false(is_loaded(path));
    free(path);
    free(expected);
}

static void expect_refusal(char *path, char *expected)
{
    expect_refusal_opts(path, expected, IB_ERR_PLUGIN, NULL);
}

/* Stages a test plugin 0755 in the private directory. */
static char *staged(const char *file)
{
    return fx_stage(PLUGINS, file, NULL, 0755);
}

static void refuses_missing_file(void **state)
{
    char *path = fx_fmt("%s/absent.so", fx_dir());
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: cannot open: No such file or directory", path));
}

static void refuses_text_file(void **state)
{
    char *path = fx_write("x.so", "this is not a shared object\n");
    (void)state;
    chmod(path, 0644);
    expect_refusal(path, fx_fmt("plugin %s: not a shared object (no ELF header)", path));
}

static void refuses_empty_file(void **state)
{
    char *path = fx_write("empty.so", "");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: not a shared object (no ELF header)", path));
}

static void refuses_executable(void **state)
{
    /* An ELF file that is not a shared object: this test's own object
     * file would do, but an executable built without PIE may not exist;
     * forge a 64-bit little-endian ELF header of type ET_REL instead. */
    static const unsigned char rel[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, [16] = 1, 0};
    char *path = fx_fmt("%s/rel.so", fx_dir());
    FILE *f = fopen(path, "wb");
    (void)state;
    assert_non_null(f);
    assert_int_equal(fwrite(rel, 1, sizeof(rel), f), sizeof(rel));
    assert_int_equal(fclose(f), 0);
    expect_refusal(path, fx_fmt("plugin %s: not a shared object (ELF type 1)", path));
}

static void refuses_directory(void **state)
{
    char *path = fx_fmt("%s/dir.so", fx_dir());
    (void)state;
    assert_int_equal(mkdir(path, 0700), 0);
    expect_refusal(path, fx_fmt("plugin %s: not a regular file", path));
}

static void refuses_fifo(void **state)
{
    char *path = fx_fmt("%s/fifo.so", fx_dir());
    (void)state;
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_refusal(path, fx_fmt("plugin %s: not a regular file", path));
}

static void refuses_empty_path(void **state)
{
    ib_plugin *p = (ib_plugin *)&p;
    ib_error err;
    (void)state;
    assert_int_equal(ib_plugin_open(&p, "", NULL, &err), IB_ERR_INVALID_ARG);
    assert_null(p);
    assert_string_equal(err.msg, "plugin: empty path");
}

static void refuses_no_entry_function(void **state)
{
    char *path = staged("no_entry.so");
    (void)state;
    expect_refusal(
        path, fx_fmt("plugin %s: no ib_plugin_entry function (not an infinity-bus plugin?)", path));
}

static void refuses_null_descriptor(void **state)
{
    char *path = staged("null_desc.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: ib_plugin_entry returned NULL", path));
}

static void refuses_wrong_magic(void **state)
{
    char *path = staged("bad_magic.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: not an infinity-bus plugin descriptor (magic "
                                "0x7f454c46, expected 0x49427573)",
                                path));
}

static void refuses_small_descriptor(void **state)
{
    char *path = staged("small_size.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: descriptor too small (12 bytes; ABI 1.0 needs %zu)",
                                path, (size_t)IB_PLUGIN_DESC_SIZE_1_0));
}

static void refuses_newer_abi_major(void **state)
{
    char *path = staged("abi2.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: built for ABI 2, host speaks ABI 1", path));
}

static void refuses_bad_plugin_name(void **state)
{
    char *path = staged("bad_name.so");
    (void)state;
    expect_refusal(path,
                   fx_fmt("plugin %s: invalid plugin name \"bad name\" (" NAME_RULE ")", path));
}

static void refuses_no_handlers(void **state)
{
    char *path = staged("no_handlers.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: declares no handlers", path));
}

static void refuses_duplicate_handler_names(void **state)
{
    char *path = staged("dup_names.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: two handlers are named \"first\"", path));
}

static void refuses_bad_handler_name(void **state)
{
    char *path = staged("bad_handler_name.so");
    (void)state;
    expect_refusal(
        path,
        fx_fmt("plugin %s: handler #2 has an invalid name \"sec/ond\" (" NAME_RULE ")", path));
}

static void refuses_null_handle_function(void **state)
{
    char *path = staged("null_handle.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: handler \"second\" has no handle function", path));
}

static void refuses_empty_type_list(void **state)
{
    char *path = staged("empty_types.so");
    (void)state;
    expect_refusal(path,
                   fx_fmt("plugin %s: handler \"second\" subscribes to no event types", path));
}

static void refuses_empty_event_type(void **state)
{
    char *path = staged("empty_type.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: handler \"second\" has an invalid event type \"\" (use "
                                "1-255 bytes without whitespace or control characters)",
                                path));
}

static void refuses_whitespace_event_type(void **state)
{
    char *path = staged("space_type.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: handler \"second\" has an invalid event type \"order "
                                "created\" (use 1-255 bytes without whitespace or control "
                                "characters)",
                                path));
}

static void refuses_group_writable_file(void **state)
{
    char *path = fx_stage(PLUGINS, "good.so", NULL, 0664);
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: file is writable by group or others (mode 0664); fix "
                                "with chmod go-w or " OPT_OUT,
                                path));
}

static void refuses_world_writable_file(void **state)
{
    char *path = fx_stage(PLUGINS, "good.so", NULL, 0757);
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: file is writable by group or others (mode 0757); fix "
                                "with chmod go-w or " OPT_OUT,
                                path));
}

static void refuses_world_writable_directory(void **state)
{
    char *path = fx_stage(PLUGINS, "good.so", "open", 0755);
    char *dir = fx_fmt("%s/open", fx_dir());
    char *real_dir = realpath(dir, NULL);
    (void)state;
    assert_non_null(real_dir);
    assert_int_equal(chmod(dir, 0777), 0);
    expect_refusal(path, fx_fmt("plugin %s: directory %s is writable by group or others (mode "
                                "0777); fix with chmod go-w or " OPT_OUT,
                                path, real_dir));
    free(dir);
    free(real_dir);
}

/* A symlink in a safe directory does not vouch for its target: the
 * target's directory is the one checked. */
static void checks_the_symlink_target_directory(void **state)
{
    char *target = fx_stage(PLUGINS, "good.so", "open", 0755);
    char *dir = fx_fmt("%s/open", fx_dir());
    char *real_dir = realpath(dir, NULL);
    char *link = fx_fmt("%s/link.so", fx_dir());
    (void)state;
    assert_int_equal(chmod(dir, 0770), 0);
    assert_int_equal(symlink(target, link), 0);
    expect_refusal(link, fx_fmt("plugin %s: directory %s is writable by group or others (mode "
                                "0770); fix with chmod go-w or " OPT_OUT,
                                link, real_dir));
    free(target);
    free(dir);
    free(real_dir);
}

/* Ownership: as root, hand the file to another uid; otherwise ask the
 * trust check to judge for another running user. Either way the file's
 * owner is neither root nor the running user. */
static void refuses_foreign_owned_file(void **state)
{
    char *path = staged("good.so");
    (void)state;
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 4242, (gid_t)-1), 0);
        expect_refusal(path, fx_fmt("plugin %s: file is owned by uid 4242, not by root or the "
                                    "running user (uid 0); fix with chown or " OPT_OUT,
                                    path));
    } else {
        int fd = 0;
        ib_error err;
        uid_t me = geteuid();
        char *expected = fx_fmt("plugin %s: file is owned by uid %u, not by root or the running "
                                "user (uid %u); fix with chown or " OPT_OUT,
                                path, (unsigned)me, (unsigned)me + 1);
        assert_int_equal(ib__plugin_trust_open(&fd, path, false, me + 1, &err), IB_ERR_PLUGIN);
        assert_int_equal(fd, -1);
        assert_string_equal(err.msg, expected);
        free(expected);
        free(path);
    }
}

static void refuses_foreign_owned_directory(void **state)
{
    char *path = fx_stage(PLUGINS, "good.so", "theirs", 0755);
    char *dir = fx_fmt("%s/theirs", fx_dir());
    char *real_dir = realpath(dir, NULL);
    (void)state;
    if (geteuid() == 0) {
        assert_int_equal(chown(dir, 4242, (gid_t)-1), 0);
        expect_refusal(path, fx_fmt("plugin %s: directory %s is owned by uid 4242, not by root "
                                    "or the running user (uid 0); fix with chown or " OPT_OUT,
                                    path, real_dir));
    } else {
        /* Without root the file cannot be trusted while its directory is
         * not: judged for another user, the file's owner is refused first. */
        int fd = 0;
        ib_error err;
        uid_t me = geteuid();
        char *expected = fx_fmt("plugin %s: file is owned by uid %u, not by root or the running "
                                "user (uid %u); fix with chown or " OPT_OUT,
                                path, (unsigned)me, (unsigned)me + 1);
        assert_int_equal(ib__plugin_trust_open(&fd, path, false, me + 1, &err), IB_ERR_PLUGIN);
        assert_int_equal(fd, -1);
        assert_string_equal(err.msg, expected);
        free(expected);
        free(path);
    }
    free(dir);
    free(real_dir);
}

/* Stages good.so in fx_dir()/a/b with a/ and a/b/ given `a_mode` and
 * 0755; returns its path and the canonical path of a/ in `*real_a`. */
static char *staged_under_a(mode_t a_mode, char **real_a)
{
    char *a = fx_fmt("%s/a", fx_dir());
    char *b = fx_fmt("%s/a/b", fx_dir());
    char *path;

    assert_int_equal(mkdir(a, 0700), 0);
    path = fx_stage(PLUGINS, "good.so", "a/b", 0755);
    assert_int_equal(chmod(b, 0755), 0);
    assert_int_equal(chmod(a, a_mode), 0);
    *real_a = realpath(a, NULL);
    assert_non_null(*real_a);
    free(a);
    free(b);
    return path;
}

/* Not only the file's own directory: whoever may write to a/ may rename
 * a/b away and put their own b/ in its place. */
static void refuses_world_writable_ancestor(void **state)
{
    char *real_a;
    char *path = staged_under_a(0777, &real_a);
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: directory %s is writable by group or others (mode "
                                "0777); fix with chmod go-w or " OPT_OUT,
                                path, real_a));
    free(real_a);
}

/* A sticky directory (/tmp) lets nobody else rename or delete a/b. */
static void accepts_sticky_world_writable_ancestor(void **state)
{
    char *real_a;
    char *path = staged_under_a(01777, &real_a);
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;
    ib_error_clear(&err);
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_string_equal(ib_plugin_name(p), "broken");
    ib_plugin_close(p);
    free(real_a);
    free(path);
}

/* The sticky bit waives the mode test only: the owner of a sticky
 * directory may still delete whatever is in it. */
static void refuses_foreign_owned_sticky_ancestor(void **state)
{
    char *real_a;
    char *path = staged_under_a(01777, &real_a);
    (void)state;
    if (geteuid() != 0) {
        free(real_a);
        free(path);
        skip();
    }
    assert_int_equal(chown(real_a, 4242, (gid_t)-1), 0);
    expect_refusal(path, fx_fmt("plugin %s: directory %s is owned by uid 4242, not by root or the "
                                "running user (uid 0); fix with chown or " OPT_OUT,
                                path, real_a));
    free(real_a);
}

static char *swap_with;

/* Runs between the checks and dlopen: puts another plugin where the
 * checked one was, as someone racing the host would. */
static void swap_file(const char *path)
{
    assert_int_equal(rename(swap_with, path), 0);
}

/* The file checked is the file loaded: it is loaded through the
 * descriptor the checks used, not by its path again. */
static void loads_the_checked_file_not_its_replacement(void **state)
{
    char *path = staged("good.so");
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    swap_with = fx_stage(PLUGINS, "old_minor.so", NULL, 0755);
    ib__plugin_before_load = swap_file;
    ib_error_clear(&err);
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    ib__plugin_before_load = NULL;
    assert_string_equal(ib_plugin_name(p), "broken");
    ib_plugin_close(p);
    /* The path now names the other plugin, and that is what loads now. */
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_string_equal(ib_plugin_name(p), "old");
    ib_plugin_close(p);
    free(swap_with);
    swap_with = NULL;
    free(path);
}

/* Each plugin is loaded as /proc/self/fd/N and its descriptor closed, so
 * the next one opened gets the same number: the C library, which finds
 * objects by name first, must not hand back the first plugin. */
static void plugins_loaded_together_stay_apart(void **state)
{
    char *paths[3] = {staged("good.so"), staged("old_minor.so"), staged("newer_minor.so")};
    const char *names[3] = {"broken", "old", "future"};
    ib_plugin *p[3] = {NULL, NULL, NULL};
    ib_error err;
    (void)state;

    for (int i = 0; i < 3; i++) {
        assert_int_equal(ib_plugin_open(&p[i], paths[i], NULL, &err), IB_OK);
        assert_string_equal(ib_plugin_name(p[i]), names[i]);
    }
    /* Closing the first frees its name; a reload of the same file under
     * another name is the same library. */
    ib_plugin_close(p[0]);
    assert_int_equal(ib_plugin_open(&p[0], paths[2], NULL, &err), IB_OK);
    assert_string_equal(ib_plugin_name(p[0]), "future");
    for (int i = 0; i < 3; i++) {
        assert_string_equal(ib_plugin_name(p[i]), i == 0 ? "future" : names[i]);
        ib_plugin_close(p[i]);
        free(paths[i]);
    }
}

static void insecure_option_allows_writable_files(void **state)
{
    ib_plugin_open_options insecure = {.allow_insecure_files = true};
    char *path = fx_stage(PLUGINS, "good.so", "open", 0666);
    char *dir = fx_fmt("%s/open", fx_dir());
    char *not_file = fx_fmt("%s/open", fx_dir());
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(ib_plugin_open(&p, path, &insecure, &err), IB_OK);
    assert_non_null(p);
    assert_string_equal(ib_plugin_name(p), "broken");
    ib_plugin_close(p);
    /* The opt-out is about trust only: a directory is still no plugin. */
    expect_refusal_opts(not_file, fx_fmt("plugin %s: not a regular file", not_file), IB_ERR_PLUGIN,
                        &insecure);
    free(path);
    free(dir);
}

static void loads_a_good_plugin(void **state)
{
    char *path = staged("good.so");
    ib_plugin *p = NULL;
    ib_error err;
    const ib_handler_desc *h;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_non_null(p);
    assert_true(is_loaded(path));
    assert_string_equal(ib_plugin_name(p), "broken");
    assert_string_equal(ib_plugin_version(p), "0.1.0");
    assert_string_equal(ib_plugin_path(p), path);
    assert_string_equal(ib_plugin_description(p), "");
    assert_int_equal(ib_plugin_abi_major(p), IB_ABI_MAJOR);
    assert_int_equal(ib_plugin_abi_minor(p), IB_ABI_MINOR);
    assert_int_equal(ib_plugin_handler_count(p), 2);
    h = ib_plugin_handler(p, 1);
    assert_non_null(h);
    assert_string_equal(h->name, "second");
    assert_string_equal(h->event_types[0], "test.good");
    assert_null(h->event_types[1]);
    assert_non_null(h->handle);
    assert_null(ib_plugin_handler(p, 2));
    ib_plugin_close(p);
    assert_false(is_loaded(path));
    free(path);
}

static void loads_an_older_minor_descriptor(void **state)
{
    char *path = staged("old_minor.so");
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_string_equal(ib_plugin_name(p), "old");
    assert_int_equal(ib_plugin_abi_minor(p), 0);
    /* The 1.1 field it lacks reads as absent. */
    assert_string_equal(ib_plugin_description(p), "");
    assert_int_equal(ib_plugin_handler_count(p), 1);
    assert_string_equal(ib_plugin_handler(p, 0)->name, "old");
    assert_int_equal(ib_plugin_init(p, &fx_host, NULL, &err), IB_OK);
    ib_plugin_close(p);
    free(path);
}

static void loads_a_newer_minor_descriptor(void **state)
{
    char *path = staged("newer_minor.so");
    ib_plugin *p = NULL;
    ib_error err;
    const ib_handler_desc *h;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_string_equal(ib_plugin_name(p), "future");
    assert_int_equal(ib_plugin_abi_minor(p), IB_ABI_MINOR + 1);
    assert_string_equal(ib_plugin_description(p), "from the future");
    /* Entries are larger than this host's: walked by the plugin's stride. */
    assert_int_equal(ib_plugin_handler_count(p), 2);
    h = ib_plugin_handler(p, 1);
    assert_string_equal(h->name, "beta");
    assert_string_equal(h->event_types[1], "test.gamma");
    assert_null(h->event_types[2]);
    ib_plugin_close(p);
    free(path);
}

static void reads_handler_flags(void **state)
{
    char *path = staged("flags_known.so");
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_handler_count(p), 2);
    assert_int_equal(ib_plugin_handler_flags(p, 0), 0);
    assert_int_equal(ib_plugin_handler_flags(p, 1), IB_HANDLER_TRANSACTIONAL);
    assert_int_equal(ib_plugin_handler(p, 1)->flags, IB_HANDLER_TRANSACTIONAL);
    assert_int_equal(ib_plugin_handler_flags(p, 2), 0);
    ib_plugin_close(p);
    free(path);
}

static void refuses_unknown_handler_flags(void **state)
{
    char *path = staged("flags_unknown.so");
    (void)state;
    expect_refusal(path, fx_fmt("plugin %s: handler \"weird\" sets unknown flag bits 0xc (this "
                                "host knows 0x3; built for a newer ABI?)",
                                path));
}

/* IB_HANDLER_TYPES_AFTER_INIT: the list init() fills in is checked after
 * init, with the rules of a static one, and a good one is what the host
 * registers. */
static void checks_types_set_by_init(void **state)
{
    char *path = staged("flags_after_init.so");
    const struct {
        const char *config, *why;
    } bad[] = {
        {"has space", "has an invalid event type \"has space\" after init (use 1-255 bytes "
                      "without whitespace or control characters)"},
        {"", "subscribes to no event types after init"},
    };
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
        ib_error_clear(&err);
        assert_int_equal(ib_plugin_init(p, &fx_host, bad[i].config, &err), IB_ERR_PLUGIN);
        char *expected = fx_fmt("plugin %s: handler \"late\" %s", path, bad[i].why);
        assert_string_equal(err.msg, expected);
        free(expected);
        ib_plugin_close(p);
    }
    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_handler_flags(p, 1), IB_HANDLER_TYPES_AFTER_INIT);
    assert_int_equal(ib_plugin_init(p, &fx_host, "order.paid", &err), IB_OK);
    assert_string_equal(ib_plugin_handler(p, 1)->event_types[0], "order.paid");
    assert_null(ib_plugin_handler(p, 1)->event_types[1]);
    ib_plugin_close(p);
    free(path);
}

/* Entries of the 1.1 stride have no flags: they read as 0, never as the
 * next entry's first bytes. */
static void older_handler_entries_have_no_flags(void **state)
{
    char *path = staged("flags_old_stride.so");
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_abi_minor(p), 1);
    assert_int_equal(ib_plugin_handler_count(p), 2);
    assert_string_equal(ib_plugin_handler(p, 0)->name, "first");
    assert_string_equal(ib_plugin_handler(p, 1)->name, "second");
    assert_int_equal(ib_plugin_handler_flags(p, 0), 0);
    assert_int_equal(ib_plugin_handler_flags(p, 1), 0);
    ib_plugin_close(p);
    free(path);
}

static void init_failure_reports_the_plugins_reason(void **state)
{
    char *path = staged("init_fail.so");
    char *expected =
        fx_fmt("plugin %s: init failed: cannot reach the ledger at ledger.example:5432", path);
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, "", &err), IB_ERR_PLUGIN);
    assert_string_equal(err.msg, expected);
    ib_plugin_close(p);
    assert_false(is_loaded(path));
    free(expected);
    free(path);
}

static void init_is_called_once(void **state)
{
    char *path = staged("good.so");
    char *expected = fx_fmt("plugin %s: already initialised", path);
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, NULL, &err), IB_ERR_INVALID_ARG);
    assert_string_equal(err.msg, expected);
    ib_plugin_close(p);
    free(expected);
    free(path);
}

static void fini_runs_at_close(void **state)
{
    char *path = staged("probe.so");
    char *log = fx_fmt("%s/probe.log", fx_dir());
    char *config = fx_fmt("file=%s,colour=blue", log);
    char *expected = fx_fmt("init abi=%d.%d config=%s\nfini\n", IB_ABI_MAJOR, IB_ABI_MINOR, config);
    char *got;
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, config, &err), IB_OK);
    got = fx_read(log);
    assert_non_null(strstr(got, "config="));
    assert_null(strstr(got, "fini"));
    free(got);
    ib_plugin_close(p);
    got = fx_read(log);
    assert_string_equal(got, expected);
    free(got);
    free(expected);
    free(config);
    free(log);
    free(path);
}

static void fini_is_skipped_after_failed_init(void **state)
{
    char *path = staged("probe.so");
    char *log = fx_fmt("%s/probe.log", fx_dir());
    char *config = fx_fmt("file=%s,fail", log);
    char *expected_msg = fx_fmt("plugin %s: init failed: asked to fail", path);
    char *expected_log = fx_fmt("init abi=%d.%d config=%s\n", IB_ABI_MAJOR, IB_ABI_MINOR, config);
    char *got;
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
    assert_int_equal(ib_plugin_init(p, &fx_host, config, &err), IB_ERR_PLUGIN);
    assert_string_equal(err.msg, expected_msg);
    ib_plugin_close(p);
    got = fx_read(log);
    assert_string_equal(got, expected_log);
    free(got);
    free(expected_log);
    free(expected_msg);
    free(config);
    free(log);
    free(path);
}

/* The whole path the CLI takes: --plugin-config beats the environment. */
static void configuration_reaches_init(void **state)
{
    char *path = staged("probe.so");
    char *log = fx_fmt("%s/probe.log", fx_dir());
    char *from_flag = fx_fmt("probe=file=%s,from=flag", log);
    char *from_env = fx_fmt("file=%s,from=env", log);
    const char *flags[] = {"other=x", from_flag, NULL};
    char *config = NULL, *got, *expected;
    ib_plugin *p = NULL;
    ib_error err;
    (void)state;

    assert_int_equal(setenv("IB_PLUGIN_CONFIG_PROBE", from_env, 1), 0);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(ib_plugin_open(&p, path, NULL, &err), IB_OK);
        assert_int_equal(
            ib_plugin_config_lookup(&config, round == 0 ? flags : NULL, ib_plugin_name(p), &err),
            IB_OK);
        assert_non_null(config);
        assert_int_equal(ib_plugin_init(p, &fx_host, config, &err), IB_OK);
        ib_plugin_close(p);
        free(config);
    }
    unsetenv("IB_PLUGIN_CONFIG_PROBE");
    got = fx_read(log);
    expected = fx_fmt("init abi=%d.%d config=file=%s,from=flag\nfini\n"
                      "init abi=%d.%d config=file=%s,from=env\nfini\n",
                      IB_ABI_MAJOR, IB_ABI_MINOR, log, IB_ABI_MAJOR, IB_ABI_MINOR, log);
    assert_string_equal(got, expected);
    free(expected);
    free(got);
    free(from_env);
    free(from_flag);
    free(log);
    free(path);
}

static void close_null_is_a_no_op(void **state)
{
    (void)state;
    ib_plugin_close(NULL);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(refuses_missing_file, teardown),
    cmocka_unit_test_teardown(refuses_text_file, teardown),
    cmocka_unit_test_teardown(refuses_empty_file, teardown),
    cmocka_unit_test_teardown(refuses_executable, teardown),
    cmocka_unit_test_teardown(refuses_directory, teardown),
    cmocka_unit_test_teardown(refuses_fifo, teardown),
    cmocka_unit_test_teardown(refuses_empty_path, teardown),
    cmocka_unit_test_teardown(refuses_no_entry_function, teardown),
    cmocka_unit_test_teardown(refuses_null_descriptor, teardown),
    cmocka_unit_test_teardown(refuses_wrong_magic, teardown),
    cmocka_unit_test_teardown(refuses_small_descriptor, teardown),
    cmocka_unit_test_teardown(refuses_newer_abi_major, teardown),
    cmocka_unit_test_teardown(refuses_bad_plugin_name, teardown),
    cmocka_unit_test_teardown(refuses_no_handlers, teardown),
    cmocka_unit_test_teardown(refuses_duplicate_handler_names, teardown),
    cmocka_unit_test_teardown(refuses_bad_handler_name, teardown),
    cmocka_unit_test_teardown(refuses_null_handle_function, teardown),
    cmocka_unit_test_teardown(refuses_empty_type_list, teardown),
    cmocka_unit_test_teardown(refuses_empty_event_type, teardown),
    cmocka_unit_test_teardown(refuses_whitespace_event_type, teardown),
    cmocka_unit_test_teardown(refuses_group_writable_file, teardown),
    cmocka_unit_test_teardown(refuses_world_writable_file, teardown),
    cmocka_unit_test_teardown(refuses_world_writable_directory, teardown),
    cmocka_unit_test_teardown(checks_the_symlink_target_directory, teardown),
    cmocka_unit_test_teardown(refuses_foreign_owned_file, teardown),
    cmocka_unit_test_teardown(refuses_foreign_owned_directory, teardown),
    cmocka_unit_test_teardown(refuses_world_writable_ancestor, teardown),
    cmocka_unit_test_teardown(accepts_sticky_world_writable_ancestor, teardown),
    cmocka_unit_test_teardown(refuses_foreign_owned_sticky_ancestor, teardown),
    cmocka_unit_test_teardown(loads_the_checked_file_not_its_replacement, teardown),
    cmocka_unit_test_teardown(plugins_loaded_together_stay_apart, teardown),
    cmocka_unit_test_teardown(insecure_option_allows_writable_files, teardown),
    cmocka_unit_test_teardown(loads_a_good_plugin, teardown),
    cmocka_unit_test_teardown(loads_an_older_minor_descriptor, teardown),
    cmocka_unit_test_teardown(loads_a_newer_minor_descriptor, teardown),
    cmocka_unit_test_teardown(reads_handler_flags, teardown),
    cmocka_unit_test_teardown(refuses_unknown_handler_flags, teardown),
    cmocka_unit_test_teardown(checks_types_set_by_init, teardown),
    cmocka_unit_test_teardown(older_handler_entries_have_no_flags, teardown),
    cmocka_unit_test_teardown(init_failure_reports_the_plugins_reason, teardown),
    cmocka_unit_test_teardown(init_is_called_once, teardown),
    cmocka_unit_test_teardown(fini_runs_at_close, teardown),
    cmocka_unit_test_teardown(fini_is_skipped_after_failed_init, teardown),
    cmocka_unit_test_teardown(configuration_reaches_init, teardown),
    cmocka_unit_test_teardown(close_null_is_a_no_op, teardown),
};

IB_TEST_MAIN(tests)
