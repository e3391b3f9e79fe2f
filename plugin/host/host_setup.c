/* SPDX-License-Identifier: Apache-2.0 */
/* The consumer setup ibus run binds or makes (host_internal.h): one
 * place for the settings a durable gets, whether it is the run's own
 * (host.c) or a partition's (host_partitions.c). */
#include "host_internal.h"

ib_consumer_setup ib__host_consumer_setup(const ib_host *h, const char *durable, const char *filter,
                                          bool create, const char *dead_letter_subject)
{
    return (ib_consumer_setup){
        .stream = h->cfg->stream,
        .durable = durable,
        .filter_subject = filter,
        .create = create,
        .stream_subjects = h->cfg->stream_subjects,
        .stream_replicas = (int)h->cfg->stream_replicas,
        .dead_letter_subject = dead_letter_subject,
        .ack_wait_ms = h->cfg->ack_wait_ms,
        .max_deliver = h->cfg->max_deliver,
        .backoff_ms = h->cfg->backoff_ms,
        .backoff_len = h->cfg->backoff_len,
        .max_ack_pending = h->cfg->max_ack_pending,
        .batch = (size_t)h->cfg->batch,
        .pull_expires_ms =
            h->cfg->pull_expires_ms > 0 ? h->cfg->pull_expires_ms : IB_PULLER_DEFAULT_EXPIRES_MS,
        .waiting_requests = IB_PULLER_MAX_WAITING,
        .stream_max_age_ms = h->cfg->stream_max_age_ms,
        .stream_max_bytes = h->cfg->stream_max_bytes,
        .dead_letter_max_age_ms = h->cfg->dead_letter_max_age_ms,
        .dead_letter_max_bytes = h->cfg->dead_letter_max_bytes,
    };
}
