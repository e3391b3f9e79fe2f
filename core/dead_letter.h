/* SPDX-License-Identifier: Apache-2.0 */
/* Why a message is dead-lettered: one enum for every part that decides,
 * carries or counts a dead letter (the host from a decode refusal,
 * dispatch from handler verdicts, the NATS dead-letter publish, metrics).
 * The names are part of the output contract: they are the values of the
 * Ibus-Reason header and of the reason label of ibus_dead_lettered_total.
 * Values index arrays (metrics), so they are numbered and never
 * renumbered; new reasons are appended before IB_DLQ_REASON_COUNT. */
#ifndef IB_DEAD_LETTER_H
#define IB_DEAD_LETTER_H

typedef enum ib_dead_letter_reason {
    IB_DLQ_DECODE = 0,      /* 0: "decode": the bytes are not a valid event */
    IB_DLQ_INVALID_ID = 1,  /* 1: "invalid-id": the event id is missing or not accepted */
    IB_DLQ_MAX_DELIVER = 2, /* 2: "max-deliver": the last allowed delivery did not succeed */
    IB_DLQ_REJECTED = 3,    /* 3: "rejected": a handler said the event can never succeed */
    IB_DLQ_OTHER = 4,       /* 4: "other": no reason ibus gives; where an out-of-range
                               value is counted */
    IB_DLQ_CONFLICT = 5,    /* 5: "conflict": a marked id came back with other content
                               (a producer reused an id; --on-conflict dead-letter) */
    IB_DLQ_REASON_COUNT
} ib_dead_letter_reason;

/* The reason's name ("decode", "invalid-id", "max-deliver", "rejected",
 * "conflict");
 * "other" for IB_DLQ_OTHER and any value out of range. Static; never
 * NULL. */
const char *ib_dead_letter_reason_str(ib_dead_letter_reason reason);

#endif
