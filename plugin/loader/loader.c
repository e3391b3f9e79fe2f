/* SPDX-License-Identifier: Apache-2.0 */
/* Loading, checking, initialising and unloading plugins (loader.h). */
#include "loader.h"
#include "loader_internal.h"
#include "trust.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The fields every ABI version keeps at these offsets: the host reads them
 * before it knows which version it is looking at. */
_Static_assert(offsetof(ib_plugin_desc, magic) == 0, "ABI: magic moved");
_Static_assert(offsetof(ib_plugin_desc, size) == 4, "ABI: size moved");
_Static_assert(offsetof(ib_plugin_desc, abi_major) == 8, "ABI: abi_major moved");
_Static_assert(offsetof(ib_plugin_desc, abi_minor) == 10, "ABI: abi_minor moved");
_Static_assert(offsetof(ib_plugin_desc, handler_size) == 12, "ABI: handler_size moved");
/* A 1.0 entry ends at `handle`; 1.2 appended `flags` right after it. */
_Static_assert(IB_HANDLER_DESC_SIZE_1_0 == 3 * sizeof(void *), "ABI: 1.0 handler entry changed");
_Static_assert(offsetof(ib_handler_desc, flags) == IB_HANDLER_DESC_SIZE_1_0,
               "ABI: handler flags moved");
_Static_assert(sizeof(ib_handler_desc) >= IB_HANDLER_DESC_SIZE_1_2, "ABI: handler desc shrank");

/* The handler flags this host knows; any other bit is refused at load. */
#define KNOWN_HANDLER_FLAGS (IB_HANDLER_TRANSACTIONAL | IB_HANDLER_TYPES_AFTER_INIT)

/* Bounds that turn a garbage descriptor into a message instead of a long
 * walk through memory. */
#define MAX_HANDLERS 1024
#define MAX_EVENT_TYPES IB_EVENT_TYPES_MAX
#define MAX_VERSION 64
#define NAME_RULE "use 1-64 characters of A-Z a-z 0-9 . _ -"
/* Descriptor numbers tried for a name no loaded object holds: each plugin
 * loaded at the time holds at most one. */
#define MAX_FD_TRIES 256

static bool is_name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

static bool valid_name(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= IB_PLUGIN_NAME_MAX || !is_name_char((unsigned char)s[n]))
            return false;
    return n > 0;
}

static bool valid_version(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= MAX_VERSION || (unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f)
            return false;
    return n > 0;
}

/* Bytes >= 0x80 pass: types are UTF-8 text. */
static bool valid_event_type(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= IB_EVENT_TYPE_MAX || (unsigned char)s[n] <= 0x20 || (unsigned char)s[n] == 0x7f)
            return false;
    return n > 0;
}

/* Copies a string the plugin supplied into `buf` for an error message:
 * bounded, with bytes outside printable ASCII shown as '?', so a bad
 * descriptor cannot break a log line. */
static const char *shown(char *buf, size_t len, const char *s)
{
    size_t i = 0;
    for (; s[i] != '\0' && i + 4 < len; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f ? '?' : s[i];
    if (s[i] != '\0') {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* Checks handler `h`'s event type list; `when` ("" or " after init")
 * tells a list init() filled in from a static one in the message. */
static ib_status check_event_types(const ib_plugin *p, const ib_handler_desc *h, const char *when,
                                   ib_error *err)
{
    char a[80];
    size_t n = 0;

    if (h->event_types == NULL || h->event_types[0] == NULL)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: handler \"%s\" subscribes to no event types%s", p->path,
                            h->name, when);
    for (; h->event_types[n] != NULL; n++) {
        const char *t = h->event_types[n];
        if (n >= MAX_EVENT_TYPES)
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: handler \"%s\" lists more than %d event types%s",
                                p->path, h->name, MAX_EVENT_TYPES, when);
        if (!valid_event_type(t))
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: handler \"%s\" has an invalid event type \"%s\"%s (use "
                                "1-255 bytes without whitespace or control characters)",
                                p->path, h->name, shown(a, sizeof(a), t), when);
        for (size_t j = 0; j < n; j++)
            if (strcmp(h->event_types[j], t) == 0)
                return ib_error_set(err, IB_ERR_PLUGIN,
                                    "plugin %s: handler \"%s\" lists event type \"%s\" twice%s",
                                    p->path, h->name, shown(a, sizeof(a), t), when);
    }
    return IB_OK;
}

static ib_status check_handlers(const ib_plugin *p, ib_error *err)
{
    char a[80];

    for (size_t i = 0; i < p->handler_count; i++) {
        const ib_handler_desc *h = &p->handlers[i];
        ib_status rc;

        if (h->name == NULL)
            return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: handler #%zu has no name", p->path,
                                i + 1);
        if (!valid_name(h->name))
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: handler #%zu has an invalid name \"%s\" (" NAME_RULE
                                ")",
                                p->path, i + 1, shown(a, sizeof(a), h->name));
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->handlers[j].name, h->name) == 0)
                return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: two handlers are named \"%s\"",
                                    p->path, h->name);
        if (h->handle == NULL)
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: handler \"%s\" has no handle function", p->path,
                                h->name);
        if ((h->flags & ~(uint32_t)KNOWN_HANDLER_FLAGS) != 0)
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: handler \"%s\" sets unknown flag bits 0x%x (this host "
                                "knows 0x%x; built for a newer ABI?)",
                                p->path, h->name,
                                (unsigned)(h->flags & ~(uint32_t)KNOWN_HANDLER_FLAGS),
                                (unsigned)KNOWN_HANDLER_FLAGS);
        /* a list init() fills in is checked after init (check_late_types) */
        if ((h->flags & IB_HANDLER_TYPES_AFTER_INIT) != 0 && h->event_types == NULL)
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: handler \"%s\" sets IB_HANDLER_TYPES_AFTER_INIT "
                                "without an event_types array for init() to fill in",
                                p->path, h->name);
        rc = (h->flags & IB_HANDLER_TYPES_AFTER_INIT) != 0 ? IB_OK
                                                           : check_event_types(p, h, "", err);
        if (rc != IB_OK)
            return rc;
    }
    return IB_OK;
}

/* The lists of the IB_HANDLER_TYPES_AFTER_INIT handlers, now that init()
 * has filled them in. */
static ib_status check_late_types(const ib_plugin *p, ib_error *err)
{
    for (size_t i = 0; i < p->handler_count; i++) {
        const ib_handler_desc *h = &p->handlers[i];
        if ((h->flags & IB_HANDLER_TYPES_AFTER_INIT) == 0)
            continue;
        ib_status rc = check_event_types(p, h, " after init", err);
        if (rc != IB_OK)
            return rc;
    }
    return IB_OK;
}

/* Copies the descriptor and checks it, in the order that gives the most
 * useful message: what it is (magic), how much of it can be read (size),
 * which ABI it speaks (major), then its content. */
static ib_status read_descriptor(ib_plugin *p, const ib_plugin_desc *raw, ib_error *err)
{
    const ib_plugin_desc *d = &p->desc;
    char a[80];
    size_t stride, known;

    if (raw == NULL)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: ib_plugin_entry returned NULL",
                            p->path);
    if (raw->magic != IB_PLUGIN_MAGIC)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: not an infinity-bus plugin descriptor (magic 0x%08x, "
                            "expected 0x%08x)",
                            p->path, (unsigned)raw->magic, (unsigned)IB_PLUGIN_MAGIC);
    if (raw->size < IB_PLUGIN_DESC_SIZE_1_0)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: descriptor too small (%u bytes; ABI 1.0 needs %zu)",
                            p->path, (unsigned)raw->size, (size_t)IB_PLUGIN_DESC_SIZE_1_0);
    if (raw->abi_major != IB_ABI_MAJOR)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: built for ABI %u, host speaks ABI %u",
                            p->path, (unsigned)raw->abi_major, (unsigned)IB_ABI_MAJOR);
    /* Older minor: read what it has, the rest stays zero. Newer minor: read
     * only the fields this host knows. */
    memcpy(&p->desc, raw, raw->size < sizeof(p->desc) ? raw->size : sizeof(p->desc));

    if (d->handler_size < IB_HANDLER_DESC_SIZE_1_0)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: handler entry too small (%u bytes; ABI 1.0 needs %zu)",
                            p->path, (unsigned)d->handler_size, (size_t)IB_HANDLER_DESC_SIZE_1_0);
    if (d->name == NULL)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: descriptor has no name", p->path);
    if (!valid_name(d->name))
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: invalid plugin name \"%s\" (" NAME_RULE ")", p->path,
                            shown(a, sizeof(a), d->name));
    if (d->version == NULL)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: descriptor has no version", p->path);
    if (!valid_version(d->version))
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: invalid version \"%s\" (use 1-64 printable characters, no "
                            "spaces)",
                            p->path, shown(a, sizeof(a), d->version));
    if (d->handlers == NULL || d->handler_count == 0)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: declares no handlers", p->path);
    if (d->handler_count > MAX_HANDLERS)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: declares %zu handlers (at most %d)",
                            p->path, d->handler_count, MAX_HANDLERS);

    /* The plugin's entries may be larger than ours (newer minor): walk them
     * with its stride and keep the part this host knows. A field is read
     * only when the stride covers it whole (a stride that ends inside
     * `flags` leaves them 0), so an older entry's neighbour is never taken
     * for its tail. */
    stride = d->handler_size;
    known =
        stride >= IB_HANDLER_DESC_SIZE_1_2 ? IB_HANDLER_DESC_SIZE_1_2 : IB_HANDLER_DESC_SIZE_1_0;
    p->handlers = calloc(d->handler_count, sizeof(*p->handlers));
    if (p->handlers == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "plugin %s: out of memory", p->path);
    p->handler_count = d->handler_count;
    for (size_t i = 0; i < p->handler_count; i++)
        memcpy(&p->handlers[i], (const unsigned char *)d->handlers + i * stride, known);
    return check_handlers(p, err);
}

static void plugin_free(ib_plugin *p)
{
    if (p->dl != NULL)
        dlclose(p->dl);
    free(p->handlers);
    free(p->path);
    free(p);
}

/* See loader_internal.h. */
void (*ib__plugin_before_load)(const char *path);

/* Whether an object already loaded answers to `name` itself. glibc finds
 * an object by name before it looks at the file, so one loaded earlier
 * through a descriptor with the same number (closed since) would be handed
 * back instead of the file behind ours. An object that is the same file
 * under another name is found too, but that one is the right answer. */
static bool name_taken(const char *name)
{
    struct link_map *lm = NULL;
    void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    bool taken;

    if (h == NULL) {
        dlerror();
        return false;
    }
    taken = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL &&
            strcmp(lm->l_name, name) == 0;
    dlclose(h);
    return taken;
}

/* Loads the checked file through its descriptor `fd` (BORROWED) into
 * `*dl`: dlopen maps what the descriptor holds, whatever the path names by
 * now. The object keeps the name /proc/self/fd/N after the descriptor is
 * closed; while that name is taken, a copy of the descriptor under a higher
 * number is tried. */
static ib_status load_fd(void **dl, const ib_plugin *p, int fd, ib_error *err)
{
    char name[48];
    int cur = fd;
    bool free_name = false;

    *dl = NULL;
    for (int tries = 0; tries < MAX_FD_TRIES && !free_name; tries++) {
        snprintf(name, sizeof(name), "/proc/self/fd/%d", cur);
        free_name = !name_taken(name);
        if (!free_name) {
            int next = fcntl(cur, F_DUPFD_CLOEXEC, cur + 1);
            if (cur != fd)
                close(cur);
            cur = next;
            if (cur < 0)
                return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot load: %s", p->path,
                                    strerror(errno));
        }
    }
    if (free_name)
        *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (cur != fd)
        close(cur);
    if (!free_name)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: cannot load: more than %d libraries loaded through "
                            "descriptors",
                            p->path, MAX_FD_TRIES);
    if (*dl == NULL) {
        const char *why = dlerror();
        size_t len = strlen(name);
        /* dlerror names the descriptor; the user knows the file. */
        if (why != NULL && strncmp(why, name, len) == 0 && why[len] == ':' && why[len + 1] == ' ')
            why += len + 2;
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot load: %s", p->path,
                            why != NULL ? why : "unknown dlopen error");
    }
    return IB_OK;
}

ib_status ib_plugin_open(ib_plugin **out, const char *path, const ib_plugin_open_options *opts,
                         ib_error *err)
{
    ib_plugin *p;
    int fd = -1;
    void *sym;
    ib_plugin_entry_fn entry;
    ib_status rc;

    *out = NULL;
    rc = ib__plugin_trust_open(&fd, path, opts != NULL && opts->allow_insecure_files, geteuid(),
                               err);
    if (rc != IB_OK)
        return rc;
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->path = strdup(path)) == NULL) {
        rc = ib_error_set(err, IB_ERR_NOMEM, "plugin %s: out of memory", path);
        goto fail;
    }
    if (ib__plugin_before_load != NULL)
        ib__plugin_before_load(path);
    rc = load_fd(&p->dl, p, fd, err);
    close(fd);
    fd = -1;
    if (rc != IB_OK)
        goto fail;
    dlerror();
    sym = dlsym(p->dl, IB_PLUGIN_ENTRY_SYMBOL);
    if (sym == NULL) {
        rc = ib_error_set(err, IB_ERR_PLUGIN,
                          "plugin %s: no " IB_PLUGIN_ENTRY_SYMBOL
                          " function (not an infinity-bus plugin?)",
                          path);
        goto fail;
    }
    entry = (ib_plugin_entry_fn)sym;
    rc = read_descriptor(p, entry(), err);
    if (rc != IB_OK)
        goto fail;
    *out = p;
    return IB_OK;

fail:
    if (p != NULL)
        plugin_free(p);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The plugin's reason goes into our log lines and CLI output: keep it to
 * one printable line. */
static void tidy_reason(char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
            *s = ' ';
}

ib_status ib_plugin_init(ib_plugin *p, const ib_host_api *api, const char *config, ib_error *err)
{
    char reason[IB_PLUGIN_ERRBUF_MIN * 2];
    void *state = NULL;
    int rc;

    if (p == NULL || api == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin init: no plugin or no host API");
    if (p->initialised)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin %s: already initialised", p->path);
    if (p->desc.init == NULL) {
        p->initialised = true;
        return IB_OK;
    }
    memset(reason, 0, sizeof(reason));
    rc = p->desc.init(&state, api, config != NULL ? config : "", reason, sizeof(reason));
    reason[sizeof(reason) - 1] = '\0';
    if (rc != 0) {
        tidy_reason(reason);
        if (reason[0] == '\0')
            return ib_error_set(err, IB_ERR_PLUGIN,
                                "plugin %s: init failed (returned %d) without a reason", p->path,
                                rc);
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: init failed: %s", p->path, reason);
    }
    p->state = state;
    /* init succeeded: fini is due at close, also when the checks below
     * refuse the plugin */
    p->initialised = true;
    return check_late_types(p, err);
}

void ib_plugin_close(ib_plugin *p)
{
    if (p == NULL)
        return;
    if (p->initialised && p->desc.fini != NULL)
        p->desc.fini(p->state);
    plugin_free(p);
}

const char *ib_plugin_name(const ib_plugin *p)
{
    return p->desc.name;
}

const char *ib_plugin_version(const ib_plugin *p)
{
    return p->desc.version;
}

const char *ib_plugin_description(const ib_plugin *p)
{
    return p->desc.description != NULL ? p->desc.description : "";
}

const char *ib_plugin_path(const ib_plugin *p)
{
    return p->path;
}

unsigned ib_plugin_abi_major(const ib_plugin *p)
{
    return p->desc.abi_major;
}

unsigned ib_plugin_abi_minor(const ib_plugin *p)
{
    return p->desc.abi_minor;
}

size_t ib_plugin_handler_count(const ib_plugin *p)
{
    return p->handler_count;
}

const ib_handler_desc *ib_plugin_handler(const ib_plugin *p, size_t i)
{
    return i < p->handler_count ? &p->handlers[i] : NULL;
}

uint32_t ib_plugin_handler_flags(const ib_plugin *p, size_t i)
{
    return i < p->handler_count ? p->handlers[i].flags : 0;
}

bool ib_plugin_is_initialised(const ib_plugin *p)
{
    return p->initialised;
}

void *ib_plugin_state(const ib_plugin *p)
{
    return p->state;
}
