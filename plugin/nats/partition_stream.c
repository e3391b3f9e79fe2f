/* SPDX-License-Identifier: Apache-2.0 */
/* Which stream captures a partitioned consumer's subjects (jetstream.h,
 * ib_partition_stream_find): the target `ibus forward` checks before it
 * moves anything, since a publish to a subject no stream captures is
 * never stored. */
#include "jetstream.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Whether one of the `n` stream subjects takes in `filter`. */
static bool any_covers(const char **subjects, int n, const char *filter)
{
    for (int i = 0; i < n; i++)
        if (subjects[i] != NULL && ib_nats_subject_covers(subjects[i], filter))
            return true;
    return false;
}

static bool any_overlaps(const char **subjects, int n, const char *filter)
{
    for (int i = 0; i < n; i++)
        if (subjects[i] != NULL && ib_nats_subjects_overlap(subjects[i], filter))
            return true;
    return false;
}

/* Whether `cfg`'s subjects take in "<base>.<p>.*" for every p < n. */
static bool covers_all(const jsStreamConfig *cfg, const char *base, uint32_t n)
{
    char filter[1100];
    for (uint32_t p = 0; p < n; p++) {
        snprintf(filter, sizeof(filter), "%s.%" PRIu32 ".*", base, p);
        if (!any_covers(cfg->Subjects, cfg->SubjectsLen, filter))
            return false;
    }
    return true;
}

ib_status ib_partition_stream_find(ib_partition_stream *out, jsCtx *js, const char *base,
                                   uint32_t n, ib_error *err)
{
    memset(out, 0, sizeof(*out));
    jsStreamInfoList *list = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_Streams(&list, js, NULL, &jerr);
    if (s == NATS_NOT_FOUND)
        return IB_OK; /* no stream at all */
    if (s != NATS_OK) {
        char why[256];
        return ib_error_set(err, IB_ERR_NATS, "cannot list the streams: %s",
                            ib_nats_strerror(why, sizeof(why), s));
    }
    char any[1100];
    snprintf(any, sizeof(any), "%s.*.*", base);
    for (int i = 0; i < list->Count && !out->found; i++) {
        const jsStreamInfo *si = list->List[i];
        if (si == NULL || si->Config == NULL || si->Config->Name == NULL)
            continue;
        const jsStreamConfig *cfg = si->Config;
        if (covers_all(cfg, base, n)) {
            out->found = true;
            out->partial = false;
            out->duplicate_window_ms = cfg->Duplicates / 1000000;
        } else if (any_overlaps(cfg->Subjects, cfg->SubjectsLen, any)) {
            out->partial = true;
        } else {
            continue;
        }
        snprintf(out->name, sizeof(out->name), "%s", cfg->Name);
    }
    jsStreamInfoList_Destroy(list);
    return IB_OK;
}
