/* SPDX-License-Identifier: Apache-2.0 */
/* Running events through dispatch for the plugin tests (fixture.h). */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "event.h"
#include "uuid.h"

static void die(const char *what, const ib_error *err)
{
    fprintf(stderr, "fixture: %s: %s\n", what, err != NULL ? err->msg : "");
    abort();
}

void fx_rerun_event(ib_dispatch *d, ib_delivery *dl, const ib_event *ev, uint64_t delivery_count)
{
    ib_error err;

    memset(dl, 0, sizeof(*dl));
    dl->event = ev;
    dl->subject = "events.test";
    dl->stream_seq = 7;
    dl->delivery_count = delivery_count;
    if (ib_dispatch_run(d, dl, 1, NULL, &err) != IB_OK)
        die("dispatch", &err);
}

void fx_run_event(ib_dispatch *d, ib_delivery *dl, ib_event **ev, const char *type,
                  const char *payload, uint64_t delivery_count)
{
    char id[IB_ID_BUF_SIZE];
    ib_event_fields f = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    ib_error err;

    if (ib_uuid4_generate(id) != IB_OK)
        die("uuid", NULL);
    f.id = id;
    f.type = type;
    f.payload = payload;
    f.payload_len = strlen(payload);
    if (ib_event_encode(&buf, &len, &f, &err) != IB_OK)
        die("encode", &err);
    if (ib_event_decode(ev, NULL, buf, len, NULL, &err) != IB_OK)
        die("decode", &err);
    free(buf);
    fx_rerun_event(d, dl, *ev, delivery_count);
}
