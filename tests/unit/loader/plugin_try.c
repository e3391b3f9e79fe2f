/* SPDX-License-Identifier: Apache-2.0 */
/* plugin_try: loads one plugin the way the host does and runs one event
 * through it, for test_install.sh.
 *
 *   plugin_try PLUGIN TYPE PAYLOAD ok|rejected|retry [CONFIG] [LOG_SUBSTRING]
 *
 * Opens PLUGIN with every trust check on, inits it with a fake host API and
 * CONFIG, registers it under durable "try" with a memory recorder, and
 * dispatches one event. Exits 0 when the outcome is the expected one (ok:
 * acked with one handler done and its marker written; rejected:
 * dead-lettered "rejected"; retry: nak'ed) and, if given, the plugin's last
 * log line contains LOG_SUBSTRING. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "event.h"
#include "fixture.h"
#include "host.h"
#include "loader.h"
#include "recorder.h"

static int fail(const char *what, const ib_error *err)
{
    fprintf(stderr, "plugin_try: %s: %s\n", what, err != NULL ? err->msg : "");
    return 1;
}

static int run(ib_dispatch *d, ib_recorder *rec, const ib_plugin *p, const char *const *argv,
               int argc)
{
    char consumer[IB_CONSUMER_MAX + 1];
    ib_event *ev = NULL;
    ib_delivery dl;
    bool done = false;
    ib_error err;
    int rc = 1;

    fx_run_event(d, &dl, &ev, argv[2], argv[3], 1);
    snprintf(consumer, sizeof(consumer), "try/%s/%s", ib_plugin_name(p),
             ib_plugin_handler(p, 0)->name);
    if (ib_recorder_is_processed(rec, &done, consumer, ev->id, &err) != IB_OK) {
        fail("recorder", &err);
        goto out;
    }
    printf("plugin %s %s: outcome %d, handled %u, marked %d, log \"%s\"\n", ib_plugin_name(p),
           ib_plugin_version(p), (int)dl.outcome, dl.counts.handled, (int)done, fx_log);
    if (strcmp(argv[4], "ok") == 0)
        rc = dl.outcome == IB_OUTCOME_ACK && dl.counts.handled == 1 && done ? 0 : 1;
    else if (strcmp(argv[4], "rejected") == 0)
        rc = dl.outcome == IB_OUTCOME_DEAD_LETTER && !done &&
                     dl.dead_letter_reason == IB_DLQ_REJECTED
                 ? 0
                 : 1;
    else if (strcmp(argv[4], "retry") == 0)
        rc = dl.outcome == IB_OUTCOME_NAK && !done ? 0 : 1;
    if (rc == 0 && argc > 6 && strstr(fx_log, argv[6]) == NULL) {
        fprintf(stderr, "plugin_try: log \"%s\" lacks \"%s\"\n", fx_log, argv[6]);
        rc = 1;
    }
out:
    ib_event_free(ev);
    return rc;
}

int main(int argc, char **argv)
{
    ib_plugin *p = NULL;
    ib_recorder *rec = NULL;
    ib_dispatch *d = NULL;
    ib_error err;
    int rc = 1;

    if (argc < 5) {
        fprintf(stderr, "usage: plugin_try PLUGIN TYPE PAYLOAD ok|rejected|retry [CONFIG] "
                        "[LOG_SUBSTRING]\n");
        return 2;
    }
    if (ib_plugin_open(&p, argv[1], NULL, &err) != IB_OK)
        return fail("open", &err);
    if (ib_plugin_init(p, &fx_host, argc > 5 ? argv[5] : "", &err) != IB_OK) {
        fail("init", &err);
        goto close_plugin;
    }
    if (ib_recorder_open(&rec, "memory:", NULL, &err) != IB_OK) {
        fail("recorder", &err);
        goto close_plugin;
    }
    if (ib_dispatch_create(&d, rec, NULL, &err) != IB_OK) {
        fail("dispatch", &err);
        goto close_recorder;
    }
    if (ib_host_plugin_register(p, d, "try", NULL, &err) != IB_OK) {
        fail("register", &err);
        goto free_dispatch;
    }
    rc = run(d, rec, p, (const char *const *)argv, argc);

free_dispatch:
    ib_dispatch_free(d);
close_recorder:
    ib_recorder_close(rec);
close_plugin:
    ib_plugin_close(p);
    return rc;
}
