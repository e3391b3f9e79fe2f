/* SPDX-License-Identifier: Apache-2.0 */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uuid.h"

static char dir[512];

const char *fx_dir(void)
{
    if (dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/ib-plugin-test.XXXXXX",
                 tmp != NULL && tmp[0] != '\0' ? tmp : P_tmpdir);
        if (mkdtemp(dir) == NULL) {
            fprintf(stderr, "mkdtemp %s: %s\n", dir, strerror(errno));
            abort();
        }
    }
    return dir;
}

char *fx_fmt(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    return s;
}

static void copy_file(const char *src, const char *dst, mode_t mode)
{
    char buf[65536];
    ssize_t n;
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    if (in < 0 || out < 0) {
        fprintf(stderr, "copy %s -> %s: %s\n", src, dst, strerror(errno));
        abort();
    }
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            abort();
    if (n < 0 || fchmod(out, mode) != 0)
        abort();
    close(in);
    close(out);
}

char *fx_stage(const char *from, const char *file, const char *sub, mode_t mode)
{
    char *src = fx_fmt("%s/%s", from, file);
    char *dst;

    if (sub != NULL) {
        char *d = fx_fmt("%s/%s", fx_dir(), sub);
        if (mkdir(d, 0700) != 0 && errno != EEXIST)
            abort();
        free(d);
        dst = fx_fmt("%s/%s/%s", fx_dir(), sub, file);
    } else {
        dst = fx_fmt("%s/%s", fx_dir(), file);
    }
    copy_file(src, dst, mode);
    free(src);
    return dst;
}

char *fx_write(const char *name, const char *text)
{
    char *path = fx_fmt("%s/%s", fx_dir(), name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        abort();
    return path;
}

char *fx_read(const char *path)
{
    FILE *f = fopen(path, "r");
    char *s = calloc(1, 65536);
    size_t n = 0;

    if (s == NULL)
        abort();
    if (f != NULL) {
        n = fread(s, 1, 65535, f);
        fclose(f);
    }
    s[n] = '\0';
    return s;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    /* A test may have left a directory without write permission. */
    chmod(path, 0700);
    return remove(path);
}

void fx_cleanup(void)
{
    if (dir[0] == '\0')
        return;
    chmod(dir, 0700);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    dir[0] = '\0';
}

char fx_log[512];
int fx_publish_result;
int fx_publish_calls;

static void fake_log(ib_log_level level, const char *plugin, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(fx_log, sizeof(fx_log), "%d %s: ", (int)level, plugin);
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(fx_log))
        vsnprintf(fx_log + n, sizeof(fx_log) - (size_t)n, fmt, ap);
    va_end(ap);
}

char fx_published_type[64], fx_published_id[33], fx_published_payload[256];
char fx_published_header[128];

static int fake_publish(ib_bus_proxy *bus, const ib_publish_request *req, char id_out[33])
{
    (void)bus;
    fx_publish_calls++;
    snprintf(fx_published_type, sizeof(fx_published_type), "%s", req->type);
    snprintf(fx_published_id, sizeof(fx_published_id), "%s", req->id != NULL ? req->id : "");
    snprintf(fx_published_payload, sizeof(fx_published_payload), "%.*s", (int)req->payload_len,
             (const char *)req->payload);
    fx_published_header[0] = '\0';
    if (req->header_count > 0)
        snprintf(fx_published_header, sizeof(fx_published_header), "%s=%s", req->headers[0].key,
                 req->headers[0].value);
    if (id_out != NULL)
        snprintf(id_out, 33, "%s", fx_publish_result == 0 && req->id != NULL ? req->id : "");
    return fx_publish_result;
}

const ib_host_api fx_host = {
    .size = sizeof(ib_host_api),
    .abi_major = IB_ABI_MAJOR,
    .abi_minor = IB_ABI_MINOR,
    .log = fake_log,
    .publish = fake_publish,
    .derive_id = ib_uuid_derive,
};
