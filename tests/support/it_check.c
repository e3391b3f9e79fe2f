/* SPDX-License-Identifier: Apache-2.0 */
/* Reading results back: summary lines, Prometheus text, handler logs
 * against the published ids, and HTTP over loopback with curl. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "it_support.h"
#include "uuid.h"

static long get_long(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : 0;
}

bool it_summary_read(it_summary *out, const char *path)
{
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, path);
    memset(out, 0, sizeof(*out));
    bool ok = n > 0;
    for (size_t i = 0; ok && i < n; i++) {
        json_error_t jerr;
        json_t *o = json_loads(lines[i], 0, &jerr);
        if (!json_is_object(o)) {
            fprintf(stderr, "it_summary: %s: line %zu is not a JSON object: %s\n", path, i + 1,
                    lines[i]);
            ok = false;
        } else {
            out->lines++;
            out->received += get_long(o, "received");
            out->handled += get_long(o, "handled");
            out->duplicates += get_long(o, "duplicates");
            out->retried += get_long(o, "retried");
            out->rejected += get_long(o, "rejected");
            out->unhandled += get_long(o, "unhandled");
            out->dead_lettered += get_long(o, "dead_lettered");
            out->acked += get_long(o, "acked");
            out->naked += get_long(o, "naked");
            out->busy += get_long(o, "busy");
            out->leftovers += get_long(o, "leftovers");
            out->pull_requests += get_long(o, "pull_requests");
            int ex = (int)get_long(o, "exit");
            if (ex > out->worst_exit)
                out->worst_exit = ex;
        }
        json_decref(o);
    }
    it_lines_free(lines, n);
    return ok;
}

int it_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static const char *curl_path(void)
{
#ifdef IT_CURL
    return IT_CURL;
#else
    return "curl";
#endif
}

int it_http_get(char **body, it_env *e, int port, const char *path)
{
    char url[128], body_path[PATH_MAX], name[64];
    static unsigned counter;
    it_proc p;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    snprintf(name, sizeof(name), "http-body-%u", ++counter);
    it_path(body_path, e, name);
    char *argv[] = {(char *)curl_path(), "-s", "-m",           "10", "-o",
                    body_path,           "-w", "%{http_code}", url,  NULL};
    if (body != NULL)
        *body = NULL;
    int st = it_proc_run(&p, e->dir, "curl", NULL, argv, it_timeout(20000));
    char *code = it_file_read(NULL, p.out_path);
    int status = st == 0 && code != NULL ? atoi(code) : 0;
    free(code);
    if (body != NULL)
        *body = it_file_read(NULL, body_path);
    unlink(body_path);
    return status;
}

bool it_prom_value(double *out, const char *body, const char *series)
{
    size_t sl = strlen(series);
    for (const char *line = body; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        if (line[0] != '#' && strncmp(line, series, sl) == 0 && line[sl] == ' ') {
            *out = strtod(line + sl + 1, NULL);
            return true;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return false;
}

bool it_make_ids(char ***ids, size_t n, const char *path)
{
    size_t cap = n * (IB_ID_LEN + 1) + 1;
    char *text = malloc(cap);
    *ids = calloc(n, sizeof(char *));
    bool ok = text != NULL && *ids != NULL;
    size_t used = 0;
    for (size_t i = 0; ok && i < n; i++) {
        char id[IB_ID_BUF_SIZE];
        ok = ib_uuid4_generate(id) == IB_OK && ((*ids)[i] = strdup(id)) != NULL;
        if (ok)
            used += (size_t)snprintf(text + used, cap - used, "%s\n", id);
    }
    ok = ok && it_file_write(path, text, used);
    free(text);
    return ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool line_counts(const char *line, const char *consumer, const char *verdict, char *id,
                        size_t id_cap)
{
    char field[256];
    if (consumer != NULL && (!it_field(field, sizeof(field), line, 0) || strcmp(field, consumer)))
        return false;
    if (verdict != NULL && (!it_field(field, sizeof(field), line, 4) || strcmp(field, verdict)))
        return false;
    return it_field(id, id_cap, line, 1);
}

bool it_tally_file(it_tally *out, const char *log_path, const char *ids_path, const char *consumer,
                   const char *verdict, size_t print_repeats)
{
    char **want = NULL, **lines = NULL;
    size_t nwant = it_file_read_lines(&want, ids_path);
    size_t nlines = it_file_read_lines(&lines, log_path);
    char **seen = calloc(nlines + 1, sizeof(char *));
    size_t nseen = 0, printed = 0;
    bool ok = seen != NULL;
    memset(out, 0, sizeof(*out));
    if (!ok)
        goto out;
    for (size_t i = 0; i < nlines; i++) {
        char id[128];
        if (line_counts(lines[i], consumer, verdict, id, sizeof(id)))
            seen[nseen++] = strdup(id);
    }
    qsort(want, nwant, sizeof(char *), cmp_str);
    qsort(seen, nseen, sizeof(char *), cmp_str);
    out->lines = nseen;
    /* distinct expected ids */
    for (size_t i = 0; i < nwant; i++)
        if (i == 0 || strcmp(want[i], want[i - 1]) != 0)
            out->expected++;
    for (size_t i = 0; i < nseen;) {
        size_t j = i + 1;
        while (j < nseen && strcmp(seen[j], seen[i]) == 0)
            j++;
        out->distinct++;
        if (j - i > 1) {
            out->repeated++;
            out->extra += j - i - 1;
            if (printed++ < print_repeats)
                fprintf(stderr, "repeat: %s handled %zu times\n", seen[i], j - i);
        }
        if (bsearch(&seen[i], want, nwant, sizeof(char *), cmp_str) == NULL)
            out->unexpected += j - i;
        i = j;
    }
    for (size_t i = 0; i < nwant; i++)
        if ((i == 0 || strcmp(want[i], want[i - 1]) != 0) &&
            bsearch(&want[i], seen, nseen, sizeof(char *), cmp_str) == NULL)
            out->missing++;
out:
    it_lines_free(seen, nseen);
    it_lines_free(lines, nlines);
    it_lines_free(want, nwant);
    return ok;
}

bool it_write_jsonl(const char *path, char *const *ids, size_t n, const char *type,
                    const char *payload)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "{\"type\":\"%s\",\"payload\":\"%s\",\"id\":\"%s\"}\n", type, payload, ids[i]);
    return fclose(f) == 0;
}

/* Writes `s` as the inside of a JSON string: only quotes and backslashes
 * need escaping in the payloads the tests make. */
static void put_json_text(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
}

bool it_write_jsonl_each(const char *path, char *const *ids, char *const *payloads, size_t n,
                         const char *type)
{
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "{\"type\":\"%s\",\"id\":\"%s\",\"payload\":\"", type, ids[i]);
        put_json_text(f, payloads[i]);
        fputs("\"}\n", f);
    }
    return fclose(f) == 0;
}
