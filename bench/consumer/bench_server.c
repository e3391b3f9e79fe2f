/* The one nats-server of a benchmark run: loopback only, a free port chosen
 * by the server itself (-p -1, read back from its ports file), JetStream
 * storage in the run's temporary directory, stopped by its pid. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Finds "nats://127.0.0.1:PORT" in the ports file the server writes. */
static bool read_ports_file(char *url, size_t len, const char *dir, pid_t pid)
{
    char path[700], text[512];
    snprintf(path, sizeof(path), "%s/ports/nats-server_%ld.ports", dir, (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *start = strstr(text, "nats://");
    if (start == NULL)
        return false;
    const char *end = strchr(start, '"');
    if (end == NULL || (size_t)(end - start) >= len)
        return false;
    memcpy(url, start, (size_t)(end - start));
    url[end - start] = '\0';
    return true;
}

ib_status ib__bench_server_start(ib__bench_server *s, const char *exe, const char *dir,
                                 ib_error *err)
{
    char store[600], ports[600], log[600];
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    snprintf(store, sizeof(store), "%s/jetstream", dir);
    snprintf(ports, sizeof(ports), "%s/ports", dir);
    snprintf(log, sizeof(log), "%s/nats-server.log", dir);
    if ((mkdir(store, 0700) != 0 && errno != EEXIST) ||
        (mkdir(ports, 0700) != 0 && errno != EEXIST))
        return ib_error_set(err, IB_ERR_IO, "nats-server: cannot create %s: %s", store,
                            strerror(errno));

    char *argv[] = {(char *)exe, "-a",  "127.0.0.1",        "-p",  "-1", "-js",
                    "-sd",       store, "--ports_file_dir", ports, NULL};
    s->pid = ib__bench_spawn(log, argv);
    if (s->pid < 0)
        return ib_error_set(err, IB_ERR_IO, "nats-server: cannot start %s", exe);
    int64_t deadline = ib__bench_now_ms() + 15000;
    while (!read_ports_file(s->url, sizeof(s->url), dir, s->pid)) {
        if (ib__bench_wait(s->pid, 0) >= 0) {
            s->pid = 0;
            return ib_error_set(err, IB_ERR_IO, "nats-server exited at start (see %s)", log);
        }
        if (ib__bench_now_ms() > deadline) {
            ib__bench_server_stop(s);
            return ib_error_set(err, IB_ERR_TIMEOUT, "nats-server: no port after 15 s (see %s)",
                                log);
        }
        ib__bench_sleep_ms(20);
    }
    /* The ports file comes before JetStream is ready: wait for a reply. */
    while (ib__bench_now_ms() < deadline) {
        natsConnection *nc = NULL;
        jsCtx *js = NULL;
        jsAccountInfo *ai = NULL;
        if (ib__bench_connect(&nc, &js, s->url, NULL) == IB_OK &&
            js_GetAccountInfo(&ai, js, NULL, NULL) == NATS_OK) {
            jsAccountInfo_Destroy(ai);
            jsCtx_Destroy(js);
            natsConnection_Destroy(nc);
            return IB_OK;
        }
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
        ib__bench_sleep_ms(50);
    }
    ib__bench_server_stop(s);
    return ib_error_set(err, IB_ERR_TIMEOUT, "nats-server: JetStream not ready after 15 s");
}

void ib__bench_server_stop(ib__bench_server *s)
{
    if (s->pid > 0)
        ib__bench_stop(s->pid, 10000);
    s->pid = 0;
}

ib_status ib__bench_connect(natsConnection **nc, jsCtx **js, const char *url, ib_error *err)
{
    natsOptions *o = NULL;
    natsStatus st;
    *nc = NULL;
    *js = NULL;
    if ((st = natsOptions_Create(&o)) != NATS_OK)
        return ib_error_set(err, IB_ERR_NOMEM, "nats options: %s", natsStatus_GetText(st));
    natsOptions_SetURL(o, url);
    natsOptions_SetName(o, "consumer_bench");
    natsOptions_SetTimeout(o, 5000);
    natsOptions_SetMaxReconnect(o, 0);
    st = natsConnection_Connect(nc, o);
    natsOptions_Destroy(o);
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "connect %s: %s", url, natsStatus_GetText(st));
    if ((st = natsConnection_JetStream(js, *nc, NULL)) != NATS_OK) {
        natsConnection_Destroy(*nc);
        *nc = NULL;
        return ib_error_set(err, IB_ERR_NATS, "jetstream context: %s", natsStatus_GetText(st));
    }
    return IB_OK;
}
