/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the JetStream ack-subject parser (plugin/nats/jsack.c). Any
 * bytes: never read out of bounds; on success the slices lie inside the
 * input and are non-empty. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jetstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exact-size heap copy so ASan sees any overread */
    char *buf = malloc(size > 0 ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    ib_jsack_meta m;
    if (ib_jsack_parse(&m, buf, size, NULL) == IB_OK) {
        assert(m.stream >= buf && m.stream + m.stream_len <= buf + size && m.stream_len > 0);
        assert(m.consumer >= buf && m.consumer + m.consumer_len <= buf + size &&
               m.consumer_len > 0);
        assert(memchr(m.stream, '.', m.stream_len) == NULL);
        assert(m.timestamp_ns >= 0);
    }
    free(buf);
    return 0;
}
