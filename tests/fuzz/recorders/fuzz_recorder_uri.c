/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: recorder URIs.
 *
 * Any bytes (cut at the first NUL, as a C string would be) go through
 * ib__recorder_config_parse. A refusal must be IB_ERR_CONFIG with a
 * printable message naming the URI; an acceptance must give a config every
 * kind can trust. Accepted memory: and sqlite::memory: URIs are also
 * opened, used and closed; nothing here touches the file system. */
#include <stdlib.h>
#include <string.h>

#include "recorder_internal.h"
#include "uuid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_config(const ib__recorder_config *cfg)
{
    size_t plen = strnlen(cfg->path, sizeof(cfg->path));
    if (plen >= sizeof(cfg->path))
        abort();
    switch (cfg->kind) {
    case IB__RECORDER_MEMORY:
        if (plen != 0 || cfg->memory_capacity > IB__MEMORY_CAPACITY_MAX)
            abort();
        break;
    case IB__RECORDER_SQLITE:
        if (plen == 0 || strchr(cfg->path, '?') != NULL)
            abort();
        break;
    case IB__RECORDER_KV:
        if (plen == 0 || strspn(cfg->path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_") != plen)
            abort();
        break;
    default:
        abort();
    }
    if (cfg->busy_timeout_ms < 1 || cfg->busy_timeout_ms > IB__BUSY_TIMEOUT_MAX_MS)
        abort();
    if (cfg->file_mode > 0777 || (cfg->file_mode & 0600) != 0600)
        abort();
    if (cfg->synchronous < IB__SQLITE_SYNC_OFF || cfg->synchronous > IB__SQLITE_SYNC_EXTRA)
        abort();
    if (cfg->now_ms == NULL)
        abort();
}

static void use(const ib__recorder_config *cfg)
{
    ib_recorder *r = NULL;
    ib_error err;
    ib_status st;
    if (cfg->kind == IB__RECORDER_MEMORY)
        st = ib__memory_open(&r, cfg, &err);
    else if (cfg->kind == IB__RECORDER_SQLITE && strcmp(cfg->path, ":memory:") == 0)
        st = ib__sqlite_open(&r, cfg, &err);
    else
        return;
    if (st != IB_OK)
        abort();
    const char *id = "0123456789abcdef0123456789abcdef";
    bool p = true;
    if (ib_recorder_is_processed(r, &p, "fuzz", id, &err) != IB_OK || p)
        abort();
    if (ib_recorder_mark(r, "fuzz", id, &err) != IB_OK)
        abort();
    if (ib_recorder_is_processed(r, &p, "fuzz", id, &err) != IB_OK || !p)
        abort();
    ib_recorder_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *uri = malloc(size + 1);
    if (uri == NULL)
        return 0;
    memcpy(uri, data, size);
    uri[size] = '\0';

    ib__recorder_config cfg;
    ib_error err;
    ib_error_clear(&err);
    ib_status st = ib__recorder_config_parse(&cfg, uri, NULL, &err);
    if (st == IB_OK) {
        check_config(&cfg);
        use(&cfg);
    } else {
        size_t len = strnlen(err.msg, sizeof(err.msg));
        if (st != IB_ERR_CONFIG || err.status != st || len == 0 || len >= sizeof(err.msg))
            abort();
        if (strncmp(err.msg, "recorder URI", 12) != 0)
            abort();
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)err.msg[i] < 0x20 || err.msg[i] == 0x7f)
                abort();
    }
    free(uri);
    return 0;
}
