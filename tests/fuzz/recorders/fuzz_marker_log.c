/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: marker log records (recorders/marker_log.c).
 *
 * Any bytes go through ib_marker_log_decode. A refusal must be
 * IB_ERR_INVALID_ARG with a printable message; an acceptance must give a
 * record that encodes back to exactly the same bytes (the format has one
 * spelling of each record), whose names are valid and whose indices are in
 * range, and that a table applies (twice: the second time adds nothing
 * but attempts). */
#include <stdlib.h>
#include <string.h>

#include "marker_log.h"
#include "marker_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ib_marker_log_names names;
static ib_marker_log_entry entries[IB_MARKER_LOG_ENTRIES_MAX];
static uint8_t again[IB_MARKER_LOG_HEADER + IB_MARKER_LOG_CONSUMERS_MAX * 256 +
                     IB_MARKER_LOG_ENTRIES_MAX * IB_MARKER_LOG_ENTRY];

static void check_message(const ib_error *e)
{
    size_t n = strnlen(e->msg, sizeof(e->msg));
    if (n == 0 || n >= sizeof(e->msg))
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)e->msg[i] < 0x20 || (unsigned char)e->msg[i] >= 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ib_marker_log_record rec;
    ib_error e = {0};
    ib_status st =
        ib_marker_log_decode(&rec, data, size, &names, entries, IB_MARKER_LOG_ENTRIES_MAX, &e);
    if (st != IB_OK) {
        if (st != IB_ERR_INVALID_ARG)
            abort();
        check_message(&e);
        return 0;
    }
    size_t len = 0;
    if (ib_marker_log_encode(&rec, again, sizeof(again), &len, &e) != IB_OK || len != size ||
        memcmp(again, data, size) != 0)
        abort();
    for (size_t i = 0; i < rec.nentries; i++)
        if (rec.entries[i].consumer >= rec.nnames)
            abort();
    ib_marker_table *t = NULL;
    if (ib_marker_table_create(&t, &e) != IB_OK)
        return 0;
    if (ib_marker_table_apply(t, &rec, &e) == IB_OK &&
        ib_marker_table_apply(t, &rec, &e) == IB_OK) {
        for (size_t i = 0; i < rec.nentries; i++) {
            ib_pair_state s =
                ib_marker_table_lookup(t, rec.names[rec.entries[i].consumer], rec.entries[i].id);
            if (!s.known && rec.kind != IB_MARKER_LOG_ENDED)
                abort();
            if (rec.kind == IB_MARKER_LOG_DONE && !s.marked)
                abort();
        }
    }
    ib_marker_table_free(t);
    return 0;
}
