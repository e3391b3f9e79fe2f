/* SPDX-License-Identifier: Apache-2.0 */
/* Consumer identities and registration (host.h): the host's policy for
 * naming the marker store of each handler, kept out of the loader, which
 * only loads plugins and hands out their handlers. */
#include "host.h"

#include <stdio.h>
#include <string.h>

#include "jetstream.h"

/* Matches "plugin/handler=..." against a plugin and handler name; returns
 * the identity after '=' or NULL. */
static const char *override_for(const char *entry, const char *plugin, const char *handler)
{
    size_t pl = strlen(plugin), hl = strlen(handler);

    if (strncmp(entry, plugin, pl) != 0 || entry[pl] != '/')
        return NULL;
    entry += pl + 1;
    if (strncmp(entry, handler, hl) != 0 || entry[hl] != '=')
        return NULL;
    return entry + hl + 1;
}

/* The last matching override wins, as with every repeatable option. */
static const char *find_override(const char *const *overrides, const char *plugin,
                                 const char *handler)
{
    const char *found = NULL;
    for (size_t i = 0; overrides != NULL && overrides[i] != NULL; i++) {
        const char *id = override_for(overrides[i], plugin, handler);
        if (id != NULL)
            found = id;
    }
    return found;
}

/* Writes handler `handler` of plugin `plugin`'s consumer identity into
 * `consumer` (IB_CONSUMER_MAX + 2 bytes); returns its length (above
 * IB_CONSUMER_MAX when too long). */
static int identity(char *consumer, const char *plugin, const char *handler, const char *durable,
                    const char *const *overrides)
{
    const char *id = find_override(overrides, plugin, handler);
    if (id != NULL)
        return snprintf(consumer, IB_CONSUMER_MAX + 2, "%s", id);
    return snprintf(consumer, IB_CONSUMER_MAX + 2, "%s/%s/%s", durable, plugin, handler);
}

char *ib_host_handler_describe(char *buf, size_t cap, const ib_plugin *p, size_t i,
                               const char *durable, const char *const *overrides)
{
    const ib_handler_desc *h = ib_plugin_handler(p, i);
    char consumer[IB_CONSUMER_MAX + 2];
    size_t used = 0;
    buf[0] = '\0';
    if (h == NULL)
        return buf;
    identity(consumer, ib_plugin_name(p), h->name, durable, overrides);
    used += (size_t)snprintf(buf, cap, "%s/%s types=", ib_plugin_name(p), h->name);
    for (size_t t = 0; h->event_types != NULL && h->event_types[t] != NULL && used < cap; t++)
        used +=
            (size_t)snprintf(buf + used, cap - used, "%s%s", t > 0 ? "," : "", h->event_types[t]);
    if (used < cap)
        snprintf(buf + used, cap - used, " consumer=%s", consumer);
    return buf;
}

int ib_host_handler_identity(char *consumer, const ib_plugin *p, size_t i, const char *durable,
                             const char *const *overrides)
{
    const ib_handler_desc *h = ib_plugin_handler(p, i);
    consumer[0] = '\0';
    return h != NULL ? identity(consumer, ib_plugin_name(p), h->name, durable, overrides) : 0;
}

/* Adds handler `h` of plugin `p` to `d` under its consumer identity. */
static ib_status register_handler(ib_plugin *p, const ib_handler_desc *h, ib_dispatch *d,
                                  const char *durable, const char *const *overrides, ib_error *err)
{
    const char *plugin = ib_plugin_name(p);
    char consumer[IB_CONSUMER_MAX + 2];
    char name[2 * IB_PLUGIN_NAME_MAX + 2];
    ib_dispatch_handler dh;
    ib_error inner;
    int n = identity(consumer, plugin, h->name, durable, overrides);

    if (n <= 0 || n > IB_CONSUMER_MAX)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "plugin %s: consumer identity of handler %s/%s must be 1-%d "
                            "bytes, got %d",
                            ib_plugin_path(p), plugin, h->name, IB_CONSUMER_MAX, n);
    /* it travels in headers (Ibus-Consumer): a CR/LF would start one of its own */
    if (ib_nats_control_at(consumer) >= 0)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "plugin %s: consumer identity of handler %s/%s holds a control byte "
                            "at byte %ld",
                            ib_plugin_path(p), plugin, h->name, ib_nats_control_at(consumer));
    snprintf(name, sizeof(name), "%s/%s", plugin, h->name);
    dh = (ib_dispatch_handler){
        .consumer = consumer,
        .name = name,
        .event_types = h->event_types,
        .handle = h->handle,
        .state = ib_plugin_state(p),
        /* dispatch, which knows the recorder, refuses it without transactions */
        .transactional = (h->flags & IB_HANDLER_TRANSACTIONAL) != 0,
    };
    ib_error_clear(&inner);
    if (ib_dispatch_add(d, &dh, &inner) != IB_OK)
        return ib_error_set(err, inner.status, "plugin %s: %s", ib_plugin_path(p), inner.msg);
    return IB_OK;
}

ib_status ib_host_plugin_register(ib_plugin *p, ib_dispatch *d, const char *durable,
                                  const char *const *overrides, ib_error *err)
{
    if (p == NULL || d == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin register: no plugin or no dispatch");
    if (!ib_plugin_is_initialised(p))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin %s: registered before init",
                            ib_plugin_path(p));
    if (durable == NULL || durable[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "plugin %s: no durable name to build consumer identities",
                            ib_plugin_path(p));
    for (size_t i = 0; i < ib_plugin_handler_count(p); i++) {
        ib_status st = register_handler(p, ib_plugin_handler(p, i), d, durable, overrides, err);
        if (st != IB_OK)
            return st;
    }
    return IB_OK;
}

static const char *plugin_named(ib_plugin *const *plugins, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        const char *pn = ib_plugin_name(plugins[i]);
        if (strlen(pn) == len && memcmp(pn, name, len) == 0)
            return pn;
    }
    return NULL;
}

static bool plugin_has_handler(ib_plugin *const *plugins, size_t n, const char *plugin,
                               const char *handler, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ib_plugin_name(plugins[i]), plugin) != 0)
            continue;
        for (size_t j = 0; j < ib_plugin_handler_count(plugins[i]); j++) {
            const char *hn = ib_plugin_handler(plugins[i], j)->name;
            if (strlen(hn) == len && memcmp(hn, handler, len) == 0)
                return true;
        }
    }
    return false;
}

ib_status ib_host_overrides_check(const char *const *overrides, ib_plugin *const *plugins, size_t n,
                                  ib_error *err)
{
    for (size_t i = 0; overrides != NULL && overrides[i] != NULL; i++) {
        const char *e = overrides[i];
        const char *eq = strchr(e, '=');
        const char *slash = eq != NULL ? memchr(e, '/', (size_t)(eq - e)) : NULL;
        const char *plugin;
        size_t key_len;

        if (eq == NULL || slash == NULL || slash == e || slash + 1 == eq)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "consumer override \"%s\": expected PLUGIN/HANDLER=IDENTITY", e);
        if (eq[1] == '\0')
            return ib_error_set(err, IB_ERR_CONFIG, "consumer override \"%s\": empty identity", e);
        if (strlen(eq + 1) > IB_CONSUMER_MAX)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "consumer override \"%.40s...\": identity longer than %d bytes", e,
                                IB_CONSUMER_MAX);
        plugin = plugin_named(plugins, n, e, (size_t)(slash - e));
        if (plugin == NULL)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "consumer override \"%s\": no loaded plugin is named \"%.*s\"", e,
                                (int)(slash - e), e);
        if (!plugin_has_handler(plugins, n, plugin, slash + 1, (size_t)(eq - slash - 1)))
            return ib_error_set(err, IB_ERR_CONFIG,
                                "consumer override \"%s\": plugin %s has no handler \"%.*s\"", e,
                                plugin, (int)(eq - slash - 1), slash + 1);
        key_len = (size_t)(eq - e) + 1;
        for (size_t j = 0; j < i; j++)
            if (strncmp(overrides[j], e, key_len) == 0)
                return ib_error_set(err, IB_ERR_CONFIG,
                                    "consumer override \"%s\": handler %.*s is overridden twice", e,
                                    (int)(eq - e), e);
    }
    return IB_OK;
}
