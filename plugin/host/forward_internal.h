/* SPDX-License-Identifier: Apache-2.0 */
/* The forwarder's state, shared by its two files (forward.h says what it
 * does): forward_setup.c opens and checks, forward.c moves the messages.
 * One thread, the main one, owns all of it. */
#ifndef IB_FORWARD_INTERNAL_H
#define IB_FORWARD_INTERNAL_H

#include "event.h"
#include "forward.h"
#include "jetstream.h"

typedef struct ib_forwarder {
    const ib_forward_config *cfg;
    ib_nats *nats;
    ib_puller *puller;
    char dead_letter[512];  /* the dead-letter subject */
    char url_shown[512];    /* the server URL without secrets */
    ib_event_limits limits; /* what the decoder accepts */
    ib_forward_totals totals;
    bool pulling; /* the summary line is due at the end */
} ib_forwarder;

/* Connects, makes sure of the durable (creating it with cfg->create),
 * checks the target stream and the duplicate window, and starts the
 * puller. Returns 0 when the forwarder can run, else the exit code (2 for
 * configuration and refusals, 1 for the rest), after an error line saying
 * why. ib__forward_close frees what it opened either way. */
int ib__forward_open(ib_forwarder *f);

/* Frees the puller and the connection (flushing the last acks). */
void ib__forward_close(ib_forwarder *f);

#endif
