/* SPDX-License-Identifier: Apache-2.0 */
/* URLs as they may be shown: in log lines, the /readyz body, metrics
 * labels and error messages. A URL can carry a secret in two places that
 * users fill in without thinking of logs: its userinfo
 * (nats://user:password@host, a token as nats://TOKEN@host,
 * https://user:pass@host) and its query (?api_key=..., a kv: recorder's
 * url= and creds=). Every part of ibus that shows a URL, a --nats-url list
 * or a recorder URI passes it through ib_redact_url first: the host, the
 * recorders, the NATS connection code, the CLI and the plugins (the http
 * plugin compiles this file in, since a plugin links nothing of ours).
 *
 * A secret elsewhere in a URL (a webhook whose path is the secret) is not
 * recognised: keep such a URL out of messages, or keep the secret in a
 * header (the http plugin's header_file=). */
#ifndef IB_REDACT_H
#define IB_REDACT_H

#include <stddef.h>

/* What a hidden query value or fragment is shown as. */
#define IB_REDACTED "REDACTED"

/* Writes `text` into `out` (`cap` bytes; always NUL-terminated, cut when
 * longer) with what may be a secret hidden:
 *   - userinfo is dropped: everything up to the last '@' before the query
 *     ("nats://u:p@h:4222" -> "nats://h:4222"; also without a scheme,
 *     "u:p@h:4222" -> "h:4222"). An '@' in a path therefore hides what
 *     precedes it too: the rule errs on the side of hiding;
 *   - every query value becomes REDACTED, keys are kept
 *     ("?api_key=s&x=1" -> "?api_key=REDACTED&x=REDACTED"); an item
 *     without '=' is all value ("?s3cret" -> "?REDACTED");
 *   - a fragment becomes "#REDACTED".
 * `text` may be one URL, a comma-separated list of them (--nats-url) or a
 * recorder URI ("kv:B?url=nats://u:p@a,nats://u:p@b&creds=F"): a comma
 * separates URLs outside a query and belongs to the value inside one.
 * NULL is shown as "". Returns `out`. No allocation; thread-safe. */
char *ib_redact_url(char *out, size_t cap, const char *text);

/* A buffer size that holds any URL this project shows in full. */
#define IB_REDACT_MAX 1024

#endif
