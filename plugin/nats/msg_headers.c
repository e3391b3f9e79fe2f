/* SPDX-License-Identifier: Apache-2.0 */
/* Copying a message's headers onto another (jetstream.h): what a dead
 * letter, a replay and a forward carry of the message they come from. */
#include <stdlib.h>

#include "jetstream.h"

natsStatus ib_msg_copy_headers(natsMsg *dst, natsMsg *src, bool (*dropped)(const char *key))
{
    const char **keys = NULL;
    int nkeys = 0;
    natsStatus s = natsMsgHeader_Keys(src, &keys, &nkeys);
    if (s == NATS_NOT_FOUND)
        return NATS_OK; /* no headers */
    for (int i = 0; s == NATS_OK && i < nkeys; i++) {
        const char **values = NULL;
        int nvalues = 0;
        if (dropped != NULL && dropped(keys[i]))
            continue;
        s = natsMsgHeader_Values(src, keys[i], &values, &nvalues);
        for (int j = 0; s == NATS_OK && j < nvalues; j++)
            s = natsMsgHeader_Add(dst, keys[i], values[j]);
        free((void *)values);
    }
    free((void *)keys);
    return s;
}
